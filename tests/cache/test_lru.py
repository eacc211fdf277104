"""The derived-data cache: a byte budget, least recently used first out, thread-safe."""

from __future__ import annotations

import threading

import pytest

from middleware.cache import DerivedCache, Identity
from middleware.cache.lru import ENTRY_OVERHEAD, text_bytes


def test_the_least_recently_used_entry_goes_first_when_the_budget_is_full() -> None:
    cache = DerivedCache(4 * (100 + ENTRY_OVERHEAD))
    for name in "abcd":
        cache.put(name, name.upper(), 100)
    assert cache.get("a") == "A"  # a is now the most recently used
    cache.put("e", "E", 100)
    assert cache.get("b") is None
    assert [cache.get(k) for k in "acde"] == ["A", "C", "D", "E"]
    stats = cache.stats()
    assert stats.evictions == 1
    assert stats.entries == 4
    assert stats.bytes == 4 * (100 + ENTRY_OVERHEAD) <= stats.max_bytes


def test_an_entry_larger_than_the_budget_is_not_kept() -> None:
    cache = DerivedCache(1_000)
    cache.put("small", 1, 10)
    cache.put("huge", 2, 10_000)
    assert cache.get("huge") is None
    assert cache.get("small") == 1


def test_putting_a_key_again_replaces_its_size() -> None:
    cache = DerivedCache(10_000)
    cache.put("k", 1, 5_000)
    cache.put("k", 2, 100)
    assert cache.get("k") == 2
    assert cache.stats().bytes == 100 + ENTRY_OVERHEAD


def test_derive_computes_once_per_key() -> None:
    cache = DerivedCache(1 << 20)
    calls: list[str] = []

    def compute(text: str) -> int:
        calls.append(text)
        return len(text)

    for text in ["abc", "abc", "de", "abc"]:
        assert cache.derive(("len", text), lambda t=text: compute(t), len(text)) == len(text)
    assert calls == ["abc", "de"]
    assert (cache.stats().hits, cache.stats().misses) == (2, 2)


def test_a_cache_of_size_zero_keeps_nothing_and_always_computes() -> None:
    cache = DerivedCache(0)
    calls = []
    for _ in range(3):
        cache.derive(("k",), lambda: calls.append(1) or 1, 1)
    assert len(calls) == 3
    assert not cache.enabled
    assert cache.stats().entries == 0


def test_a_negative_size_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 0"):
        DerivedCache(-1)


def test_threads_sharing_a_cache_keep_its_accounting_exact() -> None:
    cache = DerivedCache(50 * (10 + ENTRY_OVERHEAD))
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(2_000):
                key = (offset + i) % 120
                value = cache.derive(("n", key), lambda k=key: k * 2, 10)
                assert value == key * 2
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n * 7,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    stats = cache.stats()
    assert stats.entries <= 50
    assert stats.bytes == stats.entries * (10 + ENTRY_OVERHEAD)


# -- values of unhashable immutable objects, keyed by identity ----------------------------


def test_derive_for_reuses_the_value_of_the_same_object_only() -> None:
    cache = DerivedCache(10_000)
    computed: list[int] = []

    def compute(value: dict[str, int]) -> int:
        computed.append(1)
        return value["n"] * 2

    first, equal = {"n": 1}, {"n": 1}
    assert cache.derive_for(first, ("double",), lambda: compute(first), lambda _: 8) == 2
    assert cache.derive_for(first, ("double",), lambda: compute(first), lambda _: 8) == 2
    assert len(computed) == 1
    # An equal but distinct object is another subject: its own computation.
    assert cache.derive_for(equal, ("double",), lambda: compute(equal), lambda _: 8) == 2
    assert len(computed) == 2


def test_derive_for_keeps_its_subject_alive_so_an_identity_is_never_reused() -> None:
    cache = DerivedCache(10_000)
    subject = {"n": 1}
    ident = id(subject)
    cache.derive_for(subject, ("k",), lambda: "value", lambda _: 5)
    del subject
    # The entry still holds the object: no new object can take its id while it lives.
    survivors = [{"n": i} for i in range(1_000)]
    assert all(id(item) != ident for item in survivors)


def test_derive_for_computes_every_time_when_the_cache_keeps_nothing() -> None:
    cache = DerivedCache(0)
    calls: list[int] = []
    subject = object()
    for _ in range(2):
        cache.derive_for(subject, ("k",), lambda: calls.append(1), lambda _: 1)
    assert len(calls) == 2


def test_identity_keys_compare_by_the_object_not_its_value() -> None:
    a, b = [1], [1]
    assert Identity(a) == Identity(a)
    assert Identity(a) != Identity(b)
    assert len({Identity(a), Identity(a), Identity(b)}) == 2


# -- texts shared by entries are counted once ----------------------------------------------


def test_a_text_several_entries_hold_is_counted_once() -> None:
    cache = DerivedCache(1 << 20)
    text = "t" * 10_000
    cache.put(("digest", text), "d", 10, (text,))
    cache.put(("outline", text), "o", 10, (text,))
    assert cache.stats().bytes == 2 * (10 + ENTRY_OVERHEAD) + text_bytes(text)
    # An equal text that is another object is other memory: counted again.
    copy = "".join(["t" * 5_000, "t" * 5_000])
    cache.put(("mentions", copy), "m", 10, (copy,))
    assert cache.stats().bytes == 3 * (10 + ENTRY_OVERHEAD) + 2 * text_bytes(text)


def test_a_text_is_counted_as_the_memory_it_takes() -> None:
    """Python keeps a text at one to four bytes a character, as its widest character
    needs: one emoji makes a whole output four times as large."""
    ascii_text = "t" * 10_000
    wide = "t" * 9_999 + "\N{GRINNING FACE}"
    assert len(wide) == len(ascii_text)
    assert text_bytes(wide) > 4.9 * text_bytes(ascii_text)
    cache = DerivedCache(1 << 20)
    cache.put("ascii", 1, 10, (ascii_text,))
    narrow = cache.stats().bytes
    cache.put("wide", 1, 10, (wide,))
    assert cache.stats().bytes - narrow == 10 + ENTRY_OVERHEAD + text_bytes(wide)
    assert narrow == 10 + ENTRY_OVERHEAD + text_bytes(ascii_text) < 10_300


def test_a_shared_text_is_uncounted_when_its_last_entry_goes() -> None:
    small = 10 + ENTRY_OVERHEAD
    text = "t" * 1_000
    cache = DerivedCache(4 * (small + text_bytes(text)))
    cache.put("a", 1, 10, (text,))
    cache.put("b", 2, 10, (text,))
    assert cache.stats().bytes == 2 * small + text_bytes(text)
    fillers = 0
    while "a" in cache:  # fill until a is evicted (b was put after it)
        cache.put(f"x{fillers}", 0, 10)
        fillers += 1
    assert "b" in cache
    assert cache.stats().bytes == small * cache.stats().entries + text_bytes(text)
    while "b" in cache:
        cache.put(f"x{fillers}", 0, 10)
        fillers += 1
    assert cache.stats().bytes == small * cache.stats().entries


def test_an_entry_over_a_quarter_of_the_budget_is_not_kept() -> None:
    cache = DerivedCache(4 * (1_000 + ENTRY_OVERHEAD))
    cache.put("small", 1, 10)
    cache.put("big", 2, 1_001)
    cache.put("big text", 3, 0, ("x" * (1_000 + ENTRY_OVERHEAD),))
    assert cache.get("small") == 1
    assert cache.get("big") is None and cache.get("big text") is None


def test_get_many_looks_up_in_one_pass_and_marks_what_it_found_as_used() -> None:
    cache = DerivedCache(4 * (ENTRY_OVERHEAD + 10))  # four entries of 10 bytes fit
    for key in ("a", "b", "c", "d"):
        cache.put(key, key.upper(), 10)
    assert cache.get_many(["c", "x", "a"]) == ["C", None, "A"]
    stats = cache.stats()
    assert (stats.hits, stats.misses) == (2, 1)
    cache.put("e", "E", 10)  # evicts the least recently used: b, not a or c
    assert cache.get_many(["a", "b", "c", "d", "e"]) == ["A", None, "C", "D", "E"]


# -- an ended session's entries can be dropped ---------------------------------------------


def test_peek_many_neither_marks_as_used_nor_counts() -> None:
    cache = DerivedCache(4 * (10 + ENTRY_OVERHEAD))  # four entries of 10 bytes fit
    for key in ("a", "b", "c", "d"):
        cache.put(key, key.upper(), 10)
    assert cache.peek_many(["a", "x"]) == ["A", None]
    cache.put("e", "E", 10)  # a is still the least recently used: it goes
    assert "a" not in cache and "b" in cache
    assert (cache.stats().hits, cache.stats().misses) == (0, 0)


def test_discard_drops_the_keys_and_every_entry_holding_the_texts() -> None:
    cache = DerivedCache(1 << 20)
    mine, theirs = "m" * 5_000, "t" * 5_000
    cache.put(("digest", mine), "d1", 10, (mine,))
    cache.put(("outline", mine), "o1", 10, (mine,))
    cache.put(("digest", theirs), "d2", 10, (theirs,))
    cache.put(("message", b"mine"), "node", 100)
    cache.put(("message", b"theirs"), "node", 100)
    before = cache.stats().bytes
    equal = "".join(["m" * 2_500, "m" * 2_500])  # an equal text, another object
    freed = cache.discard([("message", b"mine"), ("message", b"absent")], [equal])
    gone = 2 * (10 + ENTRY_OVERHEAD) + text_bytes(mine) + 100 + ENTRY_OVERHEAD
    assert freed == before - cache.stats().bytes == gone
    assert ("digest", theirs) in cache and ("message", b"theirs") in cache
    assert cache.stats().entries == 2
    assert cache.discard() == 0
