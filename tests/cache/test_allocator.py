"""Freed memory is given back to the system after large releases, off the caller's thread,
once what is released with them is freed, and not too often (glibc's malloc_trim)."""

from __future__ import annotations

import sys
import threading

import pytest

from middleware.cache import allocator
from middleware.cache.allocator import Trimmer


class FakeTrim:
    def __init__(self) -> None:
        self.calls = 0
        self.threads: list[str] = []

    def __call__(self, pad: int) -> int:
        self.calls += 1
        self.threads.append(threading.current_thread().name)
        return 1


def test_small_releases_wait_until_they_add_up() -> None:
    trim = FakeTrim()
    trimmer = Trimmer(trim, min_bytes=1_000, interval=0, sleep=lambda _: None)
    trimmer.released(600)
    trimmer.wait()
    assert trim.calls == 0
    trimmer.released(600)  # 1,200 in all
    trimmer.wait()
    assert trim.calls == 1 and trim.threads == ["chatcli-malloc-trim"]
    trimmer.released(0)
    trimmer.released(-5)
    trimmer.wait()
    assert trim.calls == 1


def test_a_trim_waits_for_the_interval_and_releases_meanwhile_make_one_more() -> None:
    trimming, go = threading.Event(), threading.Event()
    events: list[str] = []

    def trim(pad: int) -> int:
        events.append("trim")
        trimming.set()
        go.wait(10)  # the first trim lasts until the releases below are made
        return 1

    trimmer = Trimmer(trim, min_bytes=100, interval=5.0, sleep=lambda s: events.append(f"{s}s"))
    trimmer.released(100)  # starts the thread
    assert trimming.wait(10)
    for _ in range(50):  # meanwhile: one more trim, after the interval
        trimmer.released(100)
    go.set()
    trimmer.wait()
    assert events == ["5.0s", "trim", "5.0s", "trim", "5.0s"] and trimmer.trims == 2


def test_without_glibc_nothing_is_done() -> None:
    trimmer = Trimmer(None)
    assert not trimmer.available
    trimmer.released(1 << 40)
    trimmer.wait()
    assert trimmer.trims == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_on_linux_the_process_trimmer_calls_malloc_trim() -> None:
    if not allocator.TRIMMER.available:
        pytest.skip("not glibc")
    trimmer = Trimmer(allocator._libc_function("malloc_trim"), min_bytes=1, interval=0)
    trimmer.released(1)
    trimmer.wait()
    assert trimmer.trims == 1


def test_an_operators_arena_count_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []

    def mallopt(option: int, value: int) -> int:
        calls.append((option, value))
        return 1

    monkeypatch.setattr(allocator, "_libc_function", lambda name: mallopt)
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    assert not allocator.tune() and calls == []
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    assert allocator.tune() and calls == [(allocator._M_ARENA_MAX, allocator.ARENAS)]
    monkeypatch.setattr(allocator, "_libc_function", lambda name: None)
    assert not allocator.tune()
