"""A thread-safe LRU of derived data with a budget in bytes.

Keys are the exact inputs of a pure function (the text itself, not a digest of it), so a
hit can never return what another input would have given: output is byte-identical with
the cache on or off, in any process. Sizes are estimates (the length of the text an entry
keeps alive plus the size of what was derived), which is what dominates memory here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

#: Bytes counted for an entry besides the sizes the caller gives (dict slot, tuple, key).
ENTRY_OVERHEAD = 200


@dataclass(frozen=True)
class CacheStats:
    """Counters since the cache was made (``hits + misses`` lookups)."""

    hits: int
    misses: int
    evictions: int
    entries: int
    bytes: int
    max_bytes: int


class DerivedCache:
    """Maps ``(kind, *inputs)`` keys to derived values, least recently used evicted first.

    ``max_bytes=0`` keeps nothing (every lookup computes). Safe to share between threads
    and between pipelines: one process-wide instance serves every session of a proxy.
    """

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"cache max_bytes must be at least 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._evictions = 0

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value stored for ``key`` (marked as just used), or ``default``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._misses += 1
                return default
            self._entries.move_to_end(key)
            self._hits += 1
            return entry[0]

    def put(self, key: Hashable, value: Any, size: int) -> None:
        """Store ``value`` for ``key``, counted as ``size`` bytes; an entry larger than
        the whole budget is not kept."""
        cost = size + ENTRY_OVERHEAD
        if cost > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (value, cost)
            self._bytes += cost
            while self._bytes > self.max_bytes:
                _, (_, freed) = self._entries.popitem(last=False)
                self._bytes -= freed
                self._evictions += 1

    def derive(self, key: tuple[Hashable, ...], compute: Callable[[], T], size: int) -> T:
        """``compute()`` the first time ``key`` is asked for, the stored value after."""
        if not self.enabled:
            return compute()
        found = self.get(key, _ABSENT)
        if found is not _ABSENT:
            value: T = found
            return value
        value = compute()
        self.put(key, value, size)
        return value

    def derive_for(
        self,
        subject: object,
        key: tuple[Hashable, ...],
        compute: Callable[[], T],
        size: Callable[[T], int],
    ) -> T:
        """:meth:`derive` for a value of an immutable object that is not hashable by
        content (a parsed tool call, whose arguments are a dict): keyed by the object's
        identity, which the entry keeps alive, so the identity cannot be reused by
        another object while the entry exists. ``size`` measures the value."""
        if not self.enabled:
            return compute()
        entry = ("object", id(subject), *key)
        found = self.get(entry, _ABSENT)
        if found is not _ABSENT and found[0] is subject:
            value: T = found[1]
            return value
        value = compute()
        self.put(entry, (subject, value), size(value))
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                self._hits, self._misses, self._evictions, len(self._entries), self._bytes,
                self.max_bytes,
            )  # fmt: skip


_ABSENT = object()


class Identity:
    """An object as a key part by identity (an immutable snapshot, such as a policy, whose
    value would be slow to hash): it keeps the object alive, so the identity is its own."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and other.value is self.value
