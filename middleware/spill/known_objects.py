"""What a process saved to an object store or read from it lately: the objects it trusts
are still there (a save of one of them writes nothing), and the texts of the small ones,
which the steps read back on every request to recognise their own previews (an object
never changes under its name; only retention removes it)."""

from __future__ import annotations

import threading
from collections import OrderedDict

#: Seconds a process trusts that an object it saved or read is still there; ``gc``
#: removes only sessions idle for much longer.
KNOWN_SECONDS = 600.0
KNOWN_ENTRIES = 100_000
#: Bytes of read results kept in memory per root (they never change).
CACHE_BYTES = 32 * 2**20


class KnownObjects:
    """The objects of one root known lately, by path; times are the root's clock's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: OrderedDict[str, float] = OrderedDict()
        self._cache: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self._cached_bytes = 0

    def knows(self, path: str, now: float) -> bool:
        """Whether ``path`` was saved or read within :data:`KNOWN_SECONDS` of ``now``."""
        with self._lock:
            seen = self._known.get(path)
            if seen is None or now - seen > KNOWN_SECONDS:
                return False
            self._known.move_to_end(path)
            return True

    def remember(self, path: str, now: float) -> None:
        with self._lock:
            self._known[path] = now
            self._known.move_to_end(path)
            while len(self._known) > KNOWN_ENTRIES:
                self._known.popitem(last=False)

    def cached(self, path: str) -> str | None:
        """The text of ``path`` if it is kept in memory."""
        with self._lock:
            cached = self._cache.get(path)
            if cached is None:
                return None
            self._cache.move_to_end(path)
            return cached[0]

    def keep(self, path: str, text: str, size: int) -> None:
        """Keep ``text`` (``size`` bytes stored) in memory unless it is too large."""
        if size > CACHE_BYTES // 4:
            return
        with self._lock:
            if path in self._cache:
                return
            self._cache[path] = (text, size)
            self._cached_bytes += size
            while self._cached_bytes > CACHE_BYTES:
                _, (_, old) = self._cache.popitem(last=False)
                self._cached_bytes -= old

    def forget(self, prefix: str) -> None:
        """Forget every object whose path starts with ``prefix``: it was removed."""
        with self._lock:
            for path in [p for p in self._known if p.startswith(prefix)]:
                del self._known[path]
            for path in [p for p in self._cache if p.startswith(prefix)]:
                self._cached_bytes -= self._cache.pop(path)[1]
