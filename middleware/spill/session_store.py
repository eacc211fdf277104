"""A session's spill store as its conversation holds it, saying what it is.

Two kinds stand behind a conversation: the session's own workspace, remembering what it
saved (:class:`~middleware.spill.remembered.RememberedStore`), and a plugin's store,
guarded (:class:`~middleware.plugin.spill_guard.GuardedSpillStore`). Whoever holds one
asks it what it can do here instead of asking which class it is: a third kind is then
one class, not a probe added in every caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from middleware.spill.workspace import SpillWorkspace

if TYPE_CHECKING:
    from middleware.report import ProblemReport


class Store(Protocol):
    """Keeps the full text of results cut from the context (the plugins' ``SpillStore``)."""

    def save(self, key: str, content: str, *, suffix: str = ".txt") -> str: ...

    def load(self, location: str) -> str | None: ...

    def close(self) -> None: ...


class SessionStore(Store, Protocol):
    """A :class:`Store` that also says what it is for the session that holds it."""

    @property
    def provided(self) -> Store:
        """The store as it was provided: a plugin's as it returned it, or the workspace."""
        ...

    @property
    def token(self) -> object | None:
        """Names what it remembers in the shared cache (``None``: it remembers nothing,
        as a plugin's store, whose contents may change behind it)."""
        ...

    @property
    def local(self) -> SpillWorkspace | None:
        """The workspace on this machine that keeps the session's record and readings
        beside its files (``None``: there is none)."""
        ...

    def sync(self) -> None:
        """Make every file saved so far durable, if the store syncs in batches."""
        ...

    def hold(self, seconds: float) -> None:
        """The session is in use and may be for ``seconds`` more: tell a store whose
        ``gc`` another process runs (an object store), if it keeps holds."""
        ...

    def reporting_to(self, problems: list[ProblemReport], time_limit: float | None) -> SessionStore:
        """The store as one ``process()`` call uses it: a plugin's reports its failures
        into ``problems`` (the call's report) and answers within ``time_limit`` (the
        call's policy); the workspace, which never fails that way, is itself."""
        ...
