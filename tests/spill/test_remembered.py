"""A pipeline saves and reads each spilled text once (issue 16, item 2): the store is
asked again only for what it did not hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from middleware.cache import DerivedCache
from middleware.spill import SpillError, SpillWorkspace
from middleware.spill.remembered import RememberedStore


class CountingStore:
    def __init__(self, inner: SpillWorkspace) -> None:
        self.inner = inner
        self.saves: list[str] = []
        self.loads: list[str] = []

    def save(self, key: str, content: str, *, suffix: str = ".txt") -> str:
        self.saves.append(key)
        return self.inner.save(key, content, suffix=suffix)

    def load(self, location: str) -> str | None:
        self.loads.append(location)
        return self.inner.load(location)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def counted(tmp_path: Path) -> CountingStore:
    return CountingStore(SpillWorkspace("s", tmp_path))


def test_the_same_text_is_saved_once(counted: CountingStore) -> None:
    store = RememberedStore(counted, DerivedCache(1 << 20))
    first = store.save("call_1", "text " * 100)
    assert store.save("call_1", "text " * 100) == first
    assert counted.saves == ["call_1"]
    # Another key, suffix or text is another file.
    store.save("call_2", "text " * 100)
    store.save("call_1", "text " * 100, suffix=".json")
    store.save("call_1", "other")
    assert counted.saves == ["call_1", "call_2", "call_1", "call_1"]


def test_a_saved_or_found_text_is_read_from_memory(counted: CountingStore) -> None:
    store = RememberedStore(counted, DerivedCache(1 << 20))
    path = store.save("call_1", "saved")
    assert store.load(path) == "saved"
    assert counted.loads == []  # saving told it what the file holds
    other = counted.inner.save("call_2", "written by another pipeline")
    assert store.load(other) == "written by another pipeline"
    assert store.load(other) == "written by another pipeline"
    assert counted.loads == [other]


def test_a_location_the_store_did_not_hold_is_asked_again(
    counted: CountingStore, tmp_path: Path
) -> None:
    store = RememberedStore(counted, DerivedCache(1 << 20))
    missing = str(counted.inner.results_dir / "call_9-0123456789abcdef.txt")
    assert store.load(missing) is None
    assert store.load(missing) is None
    assert counted.loads == [missing, missing]


def test_two_stores_on_one_cache_do_not_share_what_they_saved(counted: CountingStore) -> None:
    cache = DerivedCache(1 << 20)
    RememberedStore(counted, cache).save("call_1", "x" * 50)
    RememberedStore(counted, cache).save("call_1", "x" * 50)
    assert counted.saves == ["call_1", "call_1"]


def test_without_a_cache_every_save_reaches_the_store(counted: CountingStore) -> None:
    store = RememberedStore(counted, DerivedCache(0))
    store.save("call_1", "x")
    store.save("call_1", "x")
    assert counted.saves == ["call_1", "call_1"]


def test_a_closed_store_refuses_even_a_text_it_saved(counted: CountingStore) -> None:
    store = RememberedStore(counted, DerivedCache(1 << 20))
    store.save("call_1", "x")
    store.close()
    with pytest.raises(SpillError, match="closed"):
        store.save("call_1", "x")
