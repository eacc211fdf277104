"""A session's spill store that pays for each text once.

Every request of a session carries the same old results, and the steps save (and verify
against the store) the same texts request after request. Files are content-addressed: a
location names exactly one text, and the store keeps what it accepted while the session
lives. So a pipeline remembers what it saved and what it read, in the shared
:class:`~middleware.cache.DerivedCache`: the second save of a text costs a lookup, not a
digest, a ``stat`` and (on an object store) a round trip. A location the store did not
hold is asked again each time (it may be written later).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from middleware.cache import DerivedCache
from middleware.spill.workspace import SpillWorkspace

if TYPE_CHECKING:
    from middleware.report import ProblemReport

#: What an entry costs besides the text it keeps alive (key, location).
_ENTRY_BYTES = 300


class _Store(Protocol):
    def save(self, key: str, content: str, *, suffix: str = ".txt") -> str: ...

    def load(self, location: str) -> str | None: ...

    def close(self) -> None: ...

    @property
    def local(self) -> SpillWorkspace | None: ...

    def hold(self, seconds: float) -> object: ...


class RememberedStore:
    """``store`` with each ``save`` of the same key, suffix and text answered from
    ``cache`` after the first, and each text ``load`` found answered likewise.

    The entries are this instance's own (a pipeline's): another pipeline on the same
    folder or bucket (a restart, a replica) checks the store itself once.
    """

    def __init__(self, store: _Store, cache: DerivedCache) -> None:
        self.store = store
        self.cache = cache
        #: Names this instance's entries (not the instance: a closed store is not kept
        #: alive by the cache); steps key what they verified against this store by it.
        self.token: object | None = object()
        self._closed = False

    @property
    def provided(self) -> _Store:
        """The workspace it remembers for."""
        return self.store

    @property
    def local(self) -> SpillWorkspace | None:
        """The workspace on this machine keeping the record and readings (a local one)."""
        return self.store.local

    def hold(self, seconds: float) -> None:
        """Tell the workspace the session is in use for ``seconds`` more (an object
        store's keeps a hold for ``gc``)."""
        self.store.hold(seconds)

    def reporting_to(
        self, problems: list[ProblemReport], time_limit: float | None
    ) -> RememberedStore:
        """Itself: the workspace's failures are the steps' to record as they meet them."""
        return self

    def save(self, key: str, content: str, *, suffix: str = ".txt") -> str:
        if self._closed:  # the store says why it refuses
            return self.store.save(key, content, suffix=suffix)
        entry = ("spill-saved", self.token, key, suffix, content)
        location: str | None = self.cache.get(entry)
        if location is None:
            location = self.store.save(key, content, suffix=suffix)
            self.cache.put(entry, location, _ENTRY_BYTES, (content,))
            self.cache.put(
                ("spill-loaded", self.token, location), content, _ENTRY_BYTES, (content,)
            )
        return location

    def load(self, location: str) -> str | None:
        entry = ("spill-loaded", self.token, location)
        content: str | None = self.cache.get(entry)
        if content is None:
            content = self.store.load(location)
            if content is not None:
                self.cache.put(entry, content, _ENTRY_BYTES, (content,))
        return content

    def location(self, key: str, content: str, *, suffix: str = ".txt") -> str | None:
        """Where the store would save ``content``, if it can say so without saving."""
        where = getattr(self.store, "location", None)
        return where(key, content, suffix=suffix) if callable(where) else None

    def sync(self) -> None:
        """Sync what the store saved, if it syncs in batches (a local workspace)."""
        sync = getattr(self.store, "sync", None)
        if callable(sync):
            sync()

    def close(self) -> None:
        self._closed = True
        self.store.close()
