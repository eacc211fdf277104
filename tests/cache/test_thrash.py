"""A working set larger than the cache, walked in the same order on every request (a long
session's history, several sessions of a proxy in turn): least-recently-used eviction alone
would drop each entry just before it is needed, so every lookup would miss. Entries evicted
lately and asked for again are let back in only now and then, so part of the working set
stays cached; keys never seen before are stored as usual, so a new working set still
replaces one that is no longer used."""

from __future__ import annotations

from middleware.cache import DerivedCache
from middleware.cache.lru import ENTRY_OVERHEAD

SIZE = 100
ROOM = 50  # entries the cache holds


def cache() -> DerivedCache:
    return DerivedCache(ROOM * (SIZE + ENTRY_OVERHEAD))


def walk(store: DerivedCache, keys: list[str], rounds: int) -> list[int]:
    """Hits of each round of looking every key up in order (computing what misses)."""
    hits = []
    for _ in range(rounds):
        found = 0
        for key in keys:
            computed: list[int] = []
            store.derive(("k", key), lambda: computed.append(1) or key, SIZE)  # noqa: B023
            found += not computed
        hits.append(found)
    return hits


def test_a_working_set_larger_than_the_cache_still_partly_hits() -> None:
    keys = [f"k{i}" for i in range(3 * ROOM)]
    hits = walk(cache(), keys, 8)
    assert hits[0] == 0
    # Plain LRU would give 0 in every round; about a third of the keys (what fits) hit.
    assert all(h >= ROOM // 2 for h in hits[3:]), hits


def test_a_working_set_that_fits_hits_fully_from_its_second_round() -> None:
    keys = [f"k{i}" for i in range(ROOM)]
    assert walk(cache(), keys, 3) == [0, ROOM, ROOM]


def test_a_new_working_set_replaces_one_no_longer_used() -> None:
    store = cache()
    old = [f"old{i}" for i in range(3 * ROOM)]
    walk(store, old, 4)  # thrashing: part of it is cached
    new = [f"new{i}" for i in range(ROOM)]
    assert walk(store, new, 3)[1:] == [ROOM, ROOM]
    assert walk(store, old[:ROOM], 1) == [0]  # the old set is gone
