"""Values plugins hand to the host through the capability hooks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable


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
class FileAccess:
    """What a tool does with files: it ``read``s or ``write``s the file one of its
    ``path_arguments`` names (the first present as a string).

    A read of a file is what an agent acts on next (an edit quotes its lines), so
    microcompaction keeps it in the protected window until the file is read again or
    written, and a cut or compacted read tells the model to read the file again with
    the tool before acting on it. ``range_arguments`` select a part of the file (a read
    given any of them reads a part; a later read of the same part, or of the whole file,
    supersedes it).
    """

    action: Literal["read", "write"]
    path_arguments: tuple[str, ...]
    range_arguments: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.action not in ("read", "write"):
            raise ValueError(f"FileAccess.action must be 'read' or 'write', got {self.action!r}")
        for field_name in ("path_arguments", "range_arguments"):
            names = getattr(self, field_name)
            if not isinstance(names, tuple) or not all(
                isinstance(name, str) and name for name in names
            ):
                raise ValueError(f"FileAccess.{field_name} must be a tuple of argument names")
        if not self.path_arguments:
            raise ValueError("FileAccess.path_arguments must name at least one argument")

    def path(self, arguments: Any) -> str | None:
        """The file a call with ``arguments`` (its input) reads or writes, if it names one
        (a list of paths, as a tool reading several files takes, joined by ``, ``)."""
        if not isinstance(arguments, Mapping):
            return None
        for name in self.path_arguments:
            value = arguments.get(name)
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                value = ", ".join(value)
            if isinstance(value, str) and value:
                return value
        return None

    def part(self, arguments: Any) -> tuple[tuple[str, str], ...]:
        """The part of the file a call reads (its range arguments and their values, in
        JSON), empty for the whole file."""
        if not isinstance(arguments, Mapping):
            return ()
        return tuple(
            (name, repr(arguments[name]))
            for name in self.range_arguments
            if arguments.get(name) is not None
        )


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
