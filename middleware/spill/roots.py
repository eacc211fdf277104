"""What recall and retention need of a store's root, whatever the store: read one result,
list the session folders with their age, remove one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class SessionFolder:
    """One session's folder in a store, as retention sees it."""

    name: str
    #: POSIX time of the newest thing in it (a result, the marker, a lease).
    last_modified: float
    #: Results it holds, and their size in bytes.
    files: int
    size: int
    #: Open by a process that is still running (a local workspace's live lease).
    in_use: bool = False
    #: POSIX time until which a process serving the session said it may still use it
    #: (an object store's latest hold); ``None``: none said (a store of an older version).
    held_until: float | None = None

    def held_at(self, now: float) -> bool:
        """Whether a process serving the session may still use it at POSIX time ``now``."""
        return self.held_until is not None and self.held_until > now


class SpillRoot(Protocol):
    """A store's root: a local folder (:class:`~middleware.spill.local.LocalRoot`) or an
    object-store prefix (:class:`~middleware.spill.objects.ObjectRoot`)."""

    @property
    def url(self) -> str:
        """The root as the policy's ``spill.url`` names it (a folder or a URL)."""
        ...

    @property
    def trouble(self) -> str | None:
        """Why the store counts as down now (it failed, or missed its deadline, lately),
        or ``None``: what a health check reports."""
        ...

    def read(self, folder: str, name: str) -> str | None:
        """The result ``name`` of session folder ``folder``, if a store saved it there
        (never anything else), else ``None``; :class:`~middleware.spill.layout.SpillError`
        when the store cannot be read."""
        ...

    def sessions(self) -> list[SessionFolder]:
        """The session folders a store created under this root."""
        ...

    def remove(self, folder: str) -> bool:
        """Remove what a store wrote in session folder ``folder`` (nothing else); ``False``
        when there is no such folder, or it is in use."""
        ...
