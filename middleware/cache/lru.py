"""A thread-safe LRU of derived data with a budget in bytes, that does not thrash.

Keys are the exact inputs of a pure function (the text itself, not a digest of it), so a
hit can never return what another input would have given: output is byte-identical with
the cache on or off, in any process. Sizes are estimates (the memory of the texts an entry
keeps alive plus the size of what was derived), which is what dominates memory here.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

#: Bytes counted for an entry besides the sizes the caller gives (dict slot, tuple, key).
ENTRY_OVERHEAD = 200
#: No entry takes more than this fraction of the budget.
MAX_ENTRY_SHARE = 4
#: While the cache thrashes, one in this many entries that were evicted and are asked for
#: again is let back in (see :meth:`DerivedCache.put`).
READMIT_EVERY = 16
#: Hashes of evicted keys remembered at most (about 10 MB), outside the byte budget.
MAX_EVICTED = 100_000
#: The readings kept by digest (:attr:`DerivedCache.readings`) get this fraction of the
#: budget on top of it.
READINGS_SHARE = 8


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

    def __init__(self, max_bytes: int, *, with_readings: bool = True) -> None:
        if max_bytes < 0:
            raise ValueError(f"cache max_bytes must be at least 0, got {max_bytes}")
        self.max_bytes = max_bytes
        #: Readings of long texts (an outline, what a summary keeps) by the digest of
        #: their inputs (:func:`middleware.cache.kept.reading_name`), in a budget of their
        #: own. An entry here holds a few hundred bytes, not its text: it outlives the
        #: entries keyed by the text, so when more sessions are live than this cache holds
        #: the texts of, their results are digested again but not read again.
        self.readings: DerivedCache | None = (
            DerivedCache(max_bytes // READINGS_SHARE, with_readings=False)
            if with_readings
            else None
        )
        self._entries: OrderedDict[Hashable, tuple[Any, int, tuple[str, ...]]] = OrderedDict()
        #: Texts entries share (a result's text keys its digest, its mentions, its
        #: outline...): id -> [text, entries holding it, bytes counted]. Each is counted
        #: once, however many entries name it, so the budget measures memory rather than
        #: references.
        self._texts: dict[int, list[Any]] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        #: Hashes of the keys evicted last (keys themselves would keep their texts alive):
        #: four per entry (a working set up to five times the cache is recognised), at
        #: least 1,024 and at most MAX_EVICTED.
        self._evicted: OrderedDict[int, None] = OrderedDict()
        self._readmissions = 0

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    def __contains__(self, key: Hashable) -> bool:
        """Whether ``key`` is stored (without marking it used or counting a lookup)."""
        with self._lock:
            return key in self._entries

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

    def get_many(self, keys: Sequence[Hashable]) -> list[Any]:
        """:meth:`get` of each of ``keys`` (``None`` where missing), under one lock."""
        entries = self._entries
        found: list[Any] = []
        hits = 0
        with self._lock:
            for key in keys:
                entry = entries.get(key)
                if entry is None:
                    found.append(None)
                else:
                    entries.move_to_end(key)
                    found.append(entry[0])
                    hits += 1
            self._hits += hits
            self._misses += len(keys) - hits
        return found

    def put(self, key: Hashable, value: Any, size: int, texts: tuple[str, ...] = ()) -> None:
        """Store ``value`` for ``key``, counted as ``size`` bytes plus the length of each
        of ``texts`` (what the entry keeps alive: its key text, its value) that no other
        entry holds already. An entry of more than a quarter of the budget is not kept: it
        would evict a great deal to serve one text (a 50 MB result is a new object on
        every request anyway)."""
        cost = size + ENTRY_OVERHEAD
        if cost + sum(map(text_bytes, texts)) > self.max_bytes // MAX_ENTRY_SHARE:
            return
        with self._lock:
            if self._thrashing(key, cost, texts):
                return
            old = self._entries.pop(key, None)
            if old is not None:
                self._release(old)
            self._entries[key] = (value, cost, texts)
            self._bytes += cost
            for text in texts:
                held = self._texts.get(id(text))
                if held is None:
                    counted = text_bytes(text)
                    self._texts[id(text)] = [text, 1, counted]
                    self._bytes += counted
                else:
                    held[1] += 1
            while self._bytes > self.max_bytes:
                gone, evicted = self._entries.popitem(last=False)
                self._release(evicted)
                self._evictions += 1
                self._evicted[hash(gone)] = None
            while len(self._evicted) > min(max(4 * len(self._entries), 1_024), MAX_EVICTED):
                self._evicted.popitem(last=False)

    def _thrashing(self, key: Hashable, cost: int, texts: tuple[str, ...]) -> bool:
        """Whether storing ``key`` would only feed a thrash: the cache is full, and ``key``
        is one it evicted lately and is asked for again. A working set larger than the
        cache, walked in the same order on every request (a session's history, several
        sessions in turn), would otherwise evict each entry just before it is needed: every
        lookup would miss. Letting back in only one in :data:`READMIT_EVERY` of those keeps
        most of what is cached in place, so a share of the working set still hits. Keys
        never seen (a new session, new turns) are stored as usual, evicting the least
        recently used, so what is no longer asked for still goes."""
        if key in self._entries:
            return False
        added = cost + sum(text_bytes(t) for t in texts if id(t) not in self._texts)
        if self._bytes + added <= self.max_bytes or hash(key) not in self._evicted:
            return False
        self._readmissions += 1
        return self._readmissions % READMIT_EVERY != 0

    def peek_many(self, keys: Sequence[Hashable]) -> list[Any]:
        """The values stored for ``keys`` (``None`` where missing), neither marked as
        used nor counted as lookups."""
        with self._lock:
            return [None if (entry := self._entries.get(key)) is None else entry[0] for key in keys]

    def keys_of(self, kind: str) -> list[tuple[Any, ...]]:
        """The keys of the entries of one kind (keys are ``(kind, *inputs)``), as they are
        now."""
        with self._lock:
            return [key for key in self._entries if type(key) is tuple and key[:1] == (kind,)]

    def discard(self, keys: Sequence[Hashable] = (), texts: Sequence[str] = ()) -> int:
        """Drop the entries of ``keys``, and every entry holding one of ``texts``: what an
        ended session alone needed. Walks every entry when ``texts`` are given. Returns
        the bytes released."""
        wanted = frozenset(texts)
        with self._lock:
            before = self._bytes
            for key in keys:
                entry = self._entries.pop(key, None)
                if entry is not None:
                    self._release(entry)
            if wanted:
                gone = [
                    key
                    for key, (_, _, kept) in self._entries.items()
                    if any(text in wanted for text in kept)
                ]
                for key in gone:
                    self._release(self._entries.pop(key))
            return before - self._bytes

    def _release(self, entry: tuple[Any, int, tuple[str, ...]]) -> None:
        self._bytes -= entry[1]
        for text in entry[2]:
            held = self._texts[id(text)]
            held[1] -= 1
            if held[1] == 0:
                del self._texts[id(text)]
                self._bytes -= held[2]

    def derive(
        self,
        key: tuple[Hashable, ...],
        compute: Callable[[], T],
        size: int | Callable[[T], int],
        texts: tuple[str, ...] = (),
    ) -> T:
        """``compute()`` the first time ``key`` is asked for, the stored value after
        (``size``, or ``size(value)``, and ``texts`` as :meth:`put` counts them)."""
        if not self.enabled:
            return compute()
        found = self.get(key, _ABSENT)
        if found is not _ABSENT:
            value: T = found
            return value
        value = compute()
        self.put(key, value, size if isinstance(size, int) else size(value), texts)
        return value

    def derive_for(
        self,
        subject: object,
        key: tuple[Hashable, ...],
        compute: Callable[[], T],
        size: Callable[[T], int],
        texts: tuple[str, ...] = (),
    ) -> T:
        """:meth:`derive` for a value of an immutable object that is not hashable by
        content (a parsed tool call, whose arguments are a dict): keyed by the object's
        identity, which the entry keeps alive, so the identity cannot be reused by
        another object while the entry exists. ``size`` measures the value."""
        held: tuple[object, T] = self.derive(
            ("object", id(subject), *key),
            lambda: (subject, compute()),
            lambda pair: size(pair[1]),
            texts,
        )
        return held[1]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._texts.clear()
            self._evicted.clear()
            self._bytes = 0
        if self.readings is not None:
            self.readings.clear()

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                self._hits,
                self._misses,
                self._evictions,
                len(self._entries),
                self._bytes,
                self.max_bytes,
            )


_ABSENT = object()


def text_bytes(text: str) -> int:
    """The memory ``text`` takes, in constant time: one to four bytes a character, as its
    widest needs (an output with one emoji takes four times its length), and for a text
    that is not ASCII, its UTF-8 form too, which Python keeps beside it once a request
    holding it is written (about one byte a character: such texts are mostly ASCII)."""
    size = sys.getsizeof(text)
    return size if text.isascii() else size + len(text)


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
