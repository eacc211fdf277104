""":class:`~middleware.spill.holds.Holds` against the calls a root lends it (a dict for a
store, background calls run at once): which store calls each use of a session costs,
without an object store (tests/spill/test_holds.py runs the same through moto's S3)."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable

import pytest

from middleware.spill.holds import CHECK_SECONDS, MARK_SECONDS, Background, Holds, HoldStore
from middleware.spill.layout import HOLD_PREFIX, held_until

FOLDER = "chatcli-agent-s"


class FakeRoot:
    """A store in a dict, recording each call as (call, "marker" | "hold" | name)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}
        self.calls: list[tuple[str, str]] = []
        self.forgotten: list[str] = []
        self.is_down = False
        self.shut = False
        self.now = 1000.0
        self.wall = 1_800_000_000.0

    def store(self) -> HoldStore:
        return HoldStore(
            url="memory://bucket/p",
            mark=lambda folder: self._put(folder, ".chatcli-workspace", b"shared\n"),
            put=self._put,
            get=self._get,
            delete=self._delete,
            written=lambda folder: [n for f, n in self.objects if f == folder and n[0] != "."],
            forget=self.forgotten.append,
            submit=self._submit,
            down=lambda: self.is_down,
        )

    def holds(self) -> Holds:
        return Holds(self.store(), clock=lambda: self.now, wall=lambda: self.wall)

    def take(self) -> list[tuple[str, str]]:
        calls, self.calls = self.calls, []
        return calls

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.wall += seconds

    def held(self) -> list[float]:
        """The times the holds in the store last until."""
        return sorted(held_until(n) or 0 for f, n in self.objects if n.startswith(HOLD_PREFIX))

    def _short(self, name: str) -> str:
        return "hold" if name.startswith(HOLD_PREFIX) else name.lstrip(".").split("-")[-1]

    def _put(self, folder: str, name: str, data: bytes) -> None:
        self.calls.append(("put", self._short(name)))
        self.objects[folder, name] = data

    def _get(self, folder: str, name: str) -> bytes | None:
        self.calls.append(("get", self._short(name)))
        return self.objects.get((folder, name))

    def _delete(self, folder: str, name: str) -> None:
        self.calls.append(("delete", self._short(name)))
        del self.objects[folder, name]

    def _submit(self, call: Callable[[], None]) -> Background:
        if self.shut:
            raise RuntimeError("cannot schedule new futures after shutdown")
        future: Background = concurrent.futures.Future()
        call()
        future.set_result(None)
        return future


@pytest.fixture
def root() -> FakeRoot:
    return FakeRoot()


def test_a_folder_gets_a_hold_once_used_and_it_is_renewed_only_when_it_would_end(
    root: FakeRoot,
) -> None:
    holds = root.holds()
    assert holds.hold(FOLDER, 3600) is None  # never written or read here: nothing to hold
    assert root.take() == []
    assert holds.hold(FOLDER, 3600, using=True) is not None
    assert root.take() == [("put", "workspace"), ("put", "hold")]
    assert root.held() == [int(root.wall + 3600 + MARK_SECONDS)]
    root.advance(MARK_SECONDS - 1)  # the hold still reaches past the idle horizon
    assert holds.hold(FOLDER, 3600) is None
    assert root.take() == []
    root.advance(2)
    assert holds.hold(FOLDER, 3600) is not None
    assert root.take() == [("put", "workspace"), ("put", "hold"), ("delete", "hold")]
    assert root.held() == [int(root.wall + 3600 + MARK_SECONDS)]


def test_writes_are_checked_after_check_seconds_on_save_request_and_release(root: FakeRoot) -> None:
    holds = root.holds()
    holds.keep(FOLDER, 60)
    holds.wrote(FOLDER, 60)
    root.advance(CHECK_SECONDS - 1)
    holds.wrote(FOLDER, 60)
    assert root.take() == [("put", "workspace"), ("put", "hold")]  # no check yet
    root.advance(1)
    holds.wrote(FOLDER, 60)
    assert root.take() == [("get", "hold")]  # still there
    assert holds.release(FOLDER, 60) is None  # nothing written since that check
    holds.wrote(FOLDER, 60)
    assert holds.release(FOLDER, 60) is not None
    assert root.take() == [("get", "hold")]
    # a request (no save) checks what was written once the last check is as old
    holds.wrote(FOLDER, 60)
    root.advance(CHECK_SECONDS - 1)
    assert holds.hold(FOLDER, 60) is None
    root.advance(1)
    assert holds.hold(FOLDER, 60) is not None
    assert root.take() == [("get", "hold")]
    assert root.forgotten == []


@pytest.mark.parametrize("left", [True, False])
def test_a_folder_removed_under_the_process_is_marked_again_only_if_it_holds_writes(
    root: FakeRoot, left: bool
) -> None:
    holds = root.holds()
    holds.keep(FOLDER, 60)
    root.objects[FOLDER, "r-0123456789abcdef.txt"] = b"x"
    holds.wrote(FOLDER, 60)
    root.take()
    root.objects.clear()  # gc, or DELETE on another replica
    if left:
        root.objects[FOLDER, "late-0123456789abcdef.txt"] = b"y"
    root.advance(CHECK_SECONDS)
    holds.wrote(FOLDER, 60)
    assert root.forgotten == [FOLDER]
    marked = [("put", "workspace"), ("put", "hold")] if left else []
    assert root.take() == [("get", "hold"), *marked]
    assert len(root.held()) == int(left)
    # without the folder, the next write declares the hold again before writing
    holds.keep(FOLDER, 60)
    assert root.take() == ([] if left else [("put", "workspace"), ("put", "hold")])


def test_no_store_call_while_the_store_is_down_or_its_threads_are_shut(
    root: FakeRoot,
) -> None:
    holds = root.holds()
    root.is_down = True
    assert holds.hold(FOLDER, 60, using=True) is None
    root.is_down = False
    root.shut = True
    assert holds.hold(FOLDER, 60, using=True) is None
    assert root.take() == []
    root.shut = False  # the folder is not left marked as pending: the next use holds it
    assert holds.hold(FOLDER, 60, using=True) is not None
    assert root.take() == [("put", "workspace"), ("put", "hold")]
