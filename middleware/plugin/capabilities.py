"""Values plugins hand to the host through the capability hooks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class ToolCap:
    """A tool's declared result cap ("TruncationAware").

    ``max_chars=None`` opts the tool in with the policy's per-tool default;
    ``exempt=True`` means the tool's results are never cut.
    """

    max_chars: int | None = None
    exempt: bool = False

    def __post_init__(self) -> None:
        if self.max_chars is not None and (
            isinstance(self.max_chars, bool)
            or not isinstance(self.max_chars, int)
            or self.max_chars <= 0
        ):
            raise ValueError(
                f"ToolCap.max_chars must be a positive integer, got {self.max_chars!r}"
            )
        if self.exempt and self.max_chars is not None:
            raise ValueError("ToolCap cannot both be exempt and declare max_chars")


@dataclass(frozen=True)
class DeclaredCap:
    """A :class:`ToolCap` together with the plugin that declared it."""

    cap: ToolCap
    plugin: str


@runtime_checkable
class SpillStore(Protocol):
    """Keeps the full text of results cut from the context, so nothing is lost."""

    def save(self, key: str, content: str, *, suffix: str = ".txt") -> str:
        """Store ``content`` under a name derived from ``key`` and return the location the
        preview shows the model. Saving the same key and content again returns the same
        location without rewriting."""
        ...

    def load(self, location: str) -> str | None:
        """The content saved at ``location`` by this store, or ``None`` if it holds
        nothing there (never read anything the store did not write)."""
        ...

    def close(self) -> None:
        """Release the store (for example remove a temporary workspace)."""
        ...
