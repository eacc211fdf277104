"""A session whose prompt cache is cold is rewritten for free (issue 28, items 2 and 3):
after an idle gap past the cache's lifetime, after answers that read none of the cache,
or always with a policy that says the provider keeps none. A move made for the clock or
the answers is recorded, so the session's later requests, in this process or after a
restart, send the same bytes."""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from replica import Replica

import middleware
from middleware.cache import DerivedCache
from middleware.session.cold_cache import (
    MAX_RECORD_BYTES,
    MIN_EXPECTED_TOKENS,
    ColdMove,
    ColdRequest,
    SessionCache,
)
from middleware.spill import workspace as workspace_module
from middleware.spill.layout import RECORD, SpillError, session_folder_name
from middleware.spill.workspace import SpillWorkspace

#: A schedule that would rather not rewrite: in a warm cache, no move of this short
#: session pays for the write it causes.
THRIFTY = {"microcompact": {"schedule": {
    "trigger_tokens": 2_000, "step_turns": 2, "min_reclaim_tokens": 200,
    "rewrite_cost": 1_000.0,
}}}  # fmt: skip
START = 1_800_000_000.0


def request(turns: int) -> list[dict[str, Any]]:
    """Anthropic: a task, then ``turns`` turns of a Bash call and its 3,000-character
    output, the last message marked for the cache as Claude Code marks it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find the failing test."}]
    for i in range(turns):
        output = "\n".join(f"case {n} of step {i} passed in good time" for n in range(75))
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Step {i}."},
            {"type": "tool_use", "id": f"toolu_{i:04}", "name": "Bash",
             "input": {"command": f"pytest -k mod{i}"}},
        ]})  # fmt: skip
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i:04}", "content": output},
        ]})  # fmt: skip
    return messages


def policy(root: Path, **overrides: Any) -> middleware.Policy:
    merged = {**THRIFTY, **overrides, "spill": {"root": str(root), "keep": True}}
    return middleware.load_policy(None, env={}, dotenv_path=False, overrides=merged)


def compacted(result: middleware.ProcessResult) -> int:
    return sum(a.step == "microcompact" for a in result.report.actions)


def session(
    pipe: middleware.Pipeline, times: list[float], first: int = 3
) -> list[middleware.ProcessResult]:
    """Requests of ``first``, ``first + 1``... turns, sent at ``times``."""
    return [
        pipe.process(request(first + k), format="anthropic", now=now) for k, now in enumerate(times)
    ]


def test_a_request_after_an_idle_gap_is_compacted_for_free(tmp_path: Path) -> None:
    steady = [START + 20 * k for k in range(8)]
    with middleware.Pipeline(policy(tmp_path / "a"), session_id="s") as pipe:
        warm = session(pipe, steady)
    assert not any(map(compacted, warm))  # the rewrite never pays in a warm cache

    idle = [*steady[:4], *(t + 600 for t in steady[4:])]  # 10 minutes away before the 5th
    with middleware.Pipeline(policy(tmp_path / "b"), session_id="s") as pipe:
        cold = session(pipe, idle)
    assert [compacted(r) > 0 for r in cold] == [False] * 4 + [True] * 4
    assert pipe.prompt_cache.moved  # recorded
    off = {
        "microcompact": {
            **THRIFTY["microcompact"],
            "schedule": {**THRIFTY["microcompact"]["schedule"], "cold_rewrites": False},
        }
    }
    with middleware.Pipeline(policy(tmp_path / "c", **off), session_id="s") as pipe:
        assert not any(map(compacted, session(pipe, idle)))
    # The requests after it keep the old turns as the cold one rewrote them: the
    # provider's cache, written again by that request, keeps hitting.
    for before, after in itertools.pairwise(cold[4:]):
        kept = json.dumps(before.output[:-1])
        assert json.dumps(after.output[: len(before.output) - 1]) == kept


def test_a_restarted_process_sends_the_same_bytes_from_the_record(tmp_path: Path) -> None:
    """A new pipeline on the session's folder (a restart) makes the recorded move again,
    without the clock that caused it; without the record it could not."""
    times = [START, START + 20, START + 40, START + 700, START + 720]
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        first = session(pipe, times)
    assert compacted(first[3]) and compacted(first[4])
    record = tmp_path / session_folder_name("s") / RECORD
    assert json.loads(record.read_text())["last"] == START + 720
    with middleware.Pipeline(policy(tmp_path), session_id="s", cache=DerivedCache(0)) as pipe:
        again = pipe.process(request(7), format="anthropic", now=START + 740)
    assert json.dumps(again.output) == json.dumps(first[4].output)
    assert again.report.to_json() == first[4].report.to_json()

    record.unlink()
    with middleware.Pipeline(policy(tmp_path), session_id="s", cache=DerivedCache(0)) as pipe:
        forgot = pipe.process(request(7), format="anthropic", now=START + 740)
    assert not compacted(forgot)


def test_a_process_that_starts_after_the_gap_knows_it_from_the_record(tmp_path: Path) -> None:
    """The proxy releases an idle session's pipeline (proxy.session_idle_seconds): the
    next one reads when the session's last request was sent, from the session's folder.
    A session that kept nothing there has no folder, even under ``spill.keep`` (issue
    38, item 4), and its next pipeline does not know the gap."""
    for name, kept in (("s", True), ("t", False)):
        with middleware.Pipeline(policy(tmp_path), session_id=name) as pipe:
            session(pipe, [START, START + 20, START + 40])
            if kept:  # what a spill or a kept reading leaves
                pipe.spill.save("toolu_9999", "a spilled output")
        assert (tmp_path / session_folder_name(name)).exists() == kept
        with middleware.Pipeline(policy(tmp_path), session_id=name) as pipe:
            (late,) = session(pipe, [START + 4_000], first=6)
        assert bool(compacted(late)) == kept


def test_a_policy_without_a_cache_rewrites_whenever_it_reclaims(tmp_path: Path) -> None:
    """``ledger.cache_lifetime_seconds: null``: every move is free, and the history says
    so alone (nothing recorded: replicas that share an object store agree)."""
    uncached = policy(tmp_path, ledger={"cache_lifetime_seconds": None})
    with middleware.Pipeline(uncached, session_id="s") as pipe:
        results = session(pipe, [START] * 6)
    assert any(map(compacted, results))
    assert not pipe.prompt_cache.moved
    assert (
        not (tmp_path / session_folder_name("s") / RECORD).exists()
        or json.loads((tmp_path / session_folder_name("s") / RECORD).read_text())["moved"] == []
    )


def test_answers_that_read_nothing_of_the_cache_make_it_cold(tmp_path: Path) -> None:
    """Two answers in a row that read none of what the ledger expected (a provider that
    caches nothing, whatever the policy says): the session's requests are cold from then
    on, until an answer reads from the cache again."""
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        times = [START + 20 * k for k in range(6)]
        results = []
        for k, now in enumerate(times):
            results.append(pipe.process(request(3 + k), format="anthropic", now=now))
            pipe.prompt_cache.reported(5_000, 0)  # expected 5,000, read none
        assert [compacted(r) > 0 for r in results][:2] == [False, False]
        assert any(map(compacted, results[2:]))
        pipe.prompt_cache.reported(5_000, 4_000)
        assert not pipe.prompt_cache.request(300.0, times[-1] + 20).cold


# -- the session's view of its cache -------------------------------------------------------


class Store:
    """A record in memory (one process), or one whose writes fail."""

    record_location = "memory"

    def __init__(self, text: str | None = None, fail: bool = False) -> None:
        self.text, self.fail = text, fail
        self.writes = 0

    def record_stamp(self) -> object:
        return None if self.text is None else self.writes

    def load_record(self, max_bytes: int) -> str | None:
        return self.text

    @contextlib.contextmanager
    def record_lock(self, *, create: bool = True, until: float | None = None) -> Iterator[bool]:
        yield True

    def save_record(self, content: str) -> None:
        if self.fail:
            raise OSError("disk full")
        self.text, self.writes = content, self.writes + 1


def test_idle_past_the_lifetime_is_cold_and_only_then() -> None:
    cache = SessionCache(Store())
    assert not cache.request(300.0, 1_000.0).cold  # the first request: nothing known
    assert not cache.request(300.0, 1_300.0).cold  # exactly the lifetime: still there
    assert cache.request(300.0, 1_601.0).cold
    assert not cache.request(300.0, 1_500.0).cold  # a clock that went back: not idle
    assert cache.request(None, 1_600.0).none and not cache.request(3_600.0, 3_000.0).cold


def test_without_a_store_nothing_is_ever_cold() -> None:
    """A store shared by replicas keeps no record: no replica can make a move the others
    would not make."""
    cache = SessionCache(None)
    cache.request(300.0, 0.0)
    cache.reported(MIN_EXPECTED_TOKENS, 0)
    cache.reported(MIN_EXPECTED_TOKENS, 0)
    assert not cache.request(300.0, 10_000.0).cold


def test_misses_count_only_what_was_expected() -> None:
    cache = SessionCache(Store())
    cache.reported(None, 0)  # nothing expected (idle, or the first request)
    cache.reported(MIN_EXPECTED_TOKENS - 1, 0)  # too little for a provider to cache
    cache.reported(MIN_EXPECTED_TOKENS, 0)
    assert not cache.request(300.0, 0.0).cold
    cache.reported(MIN_EXPECTED_TOKENS, 0)
    assert cache.request(300.0, 1.0).cold
    cache.reported(MIN_EXPECTED_TOKENS, 1)
    assert not cache.request(300.0, 2.0).cold


def test_the_record_is_written_when_a_move_is_made_and_read_back() -> None:
    store = Store()
    cache = SessionCache(store)
    view = cache.request(300.0, 5.0)
    cache.made(view)  # no move: nothing written
    assert store.text is None
    view.made = ColdMove(4, 9, "0123456789abcdef")
    cache.made(view)
    assert json.loads(store.text or "") == {"moved": [[4, 9, "0123456789abcdef"]], "last": 5.0}
    again = SessionCache(store)
    assert again.moved == {ColdMove(4, 9, "0123456789abcdef")} and again.last == 5.0
    assert again.request(300.0, 6.0) == ColdRequest(False, False, frozenset(again.moved))


@pytest.mark.parametrize(
    "text",
    ["not json", '{"moved": [[1, 2]], "last": 0}', '{"moved": [[1, -2, "ab"]], "last": 0}',
     '{"moved": [[1, 2, 3]], "last": 0}', '{"moved": [], "last": "yesterday"}', '{"last": 0}',
     "[]"],
)  # fmt: skip
def test_an_unreadable_record_is_ignored_and_said(
    text: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "middleware.session.cold_cache"):
        cache = SessionCache(Store(text))
    assert not cache.moved and cache.last is None
    assert "unreadable" in caplog.text


def test_a_record_that_cannot_be_written_is_said_and_the_move_still_made(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache = SessionCache(Store(fail=True))
    view = cache.request(300.0, 1.0)
    view.made = ColdMove(2, 5, "ab")
    with caplog.at_level(logging.WARNING, "middleware.session.cold_cache"):
        cache.made(view)
    assert "not kept: disk full" in caplog.text
    assert cache.moved == {ColdMove(2, 5, "ab")}


def test_the_workspace_keeps_the_record_private_and_whole(tmp_path: Path) -> None:
    workspace = SpillWorkspace("s", tmp_path)
    with workspace.record_lock(create=False) as writable:  # no folder, none kept
        assert not writable
    assert not (tmp_path / session_folder_name("s")).exists()
    assert workspace.load_record(MAX_RECORD_BYTES) is None and workspace.record_stamp() is None
    with workspace.record_lock() as writable:
        assert writable
        workspace.save_record('{"moved": [], "last": 1.0}')
    path = tmp_path / session_folder_name("s") / RECORD
    assert path.stat().st_mode & 0o777 == 0o600
    assert workspace.load_record(MAX_RECORD_BYTES) == '{"moved": [], "last": 1.0}'
    assert workspace.load_record(26) == '{"moved": [], "last": 1.0}'  # 26 bytes
    with pytest.raises(SpillError, match="holds 26 bytes, more than the 25"):
        workspace.load_record(25)
    path.chmod(0o644)  # another user could have written it: not taken
    with pytest.raises(SpillError, match="not a private regular file"):
        workspace.load_record(MAX_RECORD_BYTES)
    workspace.close()


# -- two processes on one local root (issue 36, item 7) ------------------------------------


def overrides(root: Path) -> dict[str, Any]:
    return {**THRIFTY, "spill": {"root": str(root), "keep": True}}


IDLE = [START, START + 20, START + 40, START + 700, START + 720]


def sent(result: middleware.ProcessResult) -> str:
    """The bytes a proxy would send on (as :mod:`replica` gives them)."""
    return json.dumps(result.output, ensure_ascii=False)


def test_a_process_that_closes_last_keeps_the_moves_of_another(tmp_path: Path) -> None:
    """Two processes serve one session from one local root: the one that moved nothing
    closes last. Its record merges with the other's instead of replacing it, so a restart
    still makes the other's move and sends the same bytes."""
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(Replica("s", overrides(tmp_path)))
        b = stack.enter_context(Replica("s", overrides(tmp_path)))
        b.process_body(request(3), now=START + 30, format="anthropic")  # warm: moves nothing
        answers = [
            a.process_body(request(3 + k), now=now, format="anthropic")
            for k, now in enumerate(IDLE)
        ]
        assert answers[3]["actions"] and answers[4]["actions"]  # moved on the cold cache
        a.stop()
        b.stop()
    record = json.loads((tmp_path / session_folder_name("s") / RECORD).read_text())
    assert record["moved"] and record["last"] == START + 720
    with middleware.Pipeline(policy(tmp_path), session_id="s", cache=DerivedCache(0)) as pipe:
        again = pipe.process(request(7), format="anthropic", now=START + 740)
    assert sent(again) == answers[4]["sent"]


def test_a_process_makes_the_moves_another_recorded_since_it_started(tmp_path: Path) -> None:
    """The record is read again when it changes: a process that started before another
    made a move sends what the other sends for the same request."""
    with Replica("s", overrides(tmp_path)) as a, Replica("s", overrides(tmp_path)) as b:
        assert b.load(str(tmp_path / "nothing")) is None  # b has read the (missing) record
        for k, now in enumerate(IDLE[:4]):
            a.process_body(request(3 + k), now=now, format="anthropic")
        from_a = a.process_body(request(7), now=START + 720, format="anthropic")
        from_b = b.process_body(request(7), now=START + 725, format="anthropic")
    assert from_a["actions"]
    assert from_b["sent"] == from_a["sent"]


#: A process of its own that makes ``count`` moves in a session of ``root``, each saved at
#: once, starting when it reads a line.
MOVER = """
import sys
from middleware.session.cold_cache import ColdMove, SessionCache
from middleware.spill.workspace import SpillWorkspace

root, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
workspace = SpillWorkspace("s", root, keep=True)
cache = SessionCache(workspace)
print("ready", flush=True)
sys.stdin.readline()
for turn in range(count):
    view = cache.request(300.0, 1_000.0 + turn)
    view.made = ColdMove(turn, turn, tag)
    cache.made(view)
cache.save()
workspace.close()
"""


def test_two_processes_moving_at_once_lose_none_of_the_moves(tmp_path: Path) -> None:
    """Each saves its record after each move while the other does the same: the record
    ends with the moves of both."""
    count = 150
    command = [sys.executable, "-c", MOVER, str(tmp_path)]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
    movers = [subprocess.Popen([*command, tag, str(count)], **pipes) for tag in ("a", "b")]
    try:
        for mover in movers:
            assert mover.stdout is not None and mover.stdout.readline() == "ready\n"
        for mover in movers:  # both load the (empty) record before either moves
            assert mover.stdin is not None
            mover.stdin.write("go\n")
            mover.stdin.flush()
        for mover in movers:
            assert mover.wait(timeout=120) == 0
    finally:
        for mover in movers:
            mover.kill()
            mover.communicate()
    record = json.loads((tmp_path / session_folder_name("s") / RECORD).read_text())
    moves = {tuple(move) for move in record["moved"]}
    assert len(moves) == 2 * count
    assert moves == {(t, t, tag) for t in range(count) for tag in ("a", "b")}


# -- a corrupt record (issue 36, item 9) ---------------------------------------------------


def huge() -> bytes:
    """A record of 60 MB."""
    move = b'[4, 9, "0123456789abcdef"], '
    return b'{"moved": [' + move * (60_000_000 // len(move)) + b'[4, 9, "ab"]], "last": 1.0}'


CORRUPT: dict[str, Callable[[], bytes]] = {
    "a 400-digit time": lambda: b'{"moved": [], "last": 1' + b"0" * 399 + b"}",
    "a 400-digit count": lambda: b'{"moved": [[4' + b"0" * 399 + b', 9, "ab"]], "last": 1.0}',
    "NaN": lambda: b'{"moved": [], "last": NaN}',
    "Infinity": lambda: b'{"moved": [[4, 9, "0123456789abcdef"]], "last": Infinity}',
    "a negative time": lambda: b'{"moved": [], "last": -1e300}',
    "a time that is true": lambda: b'{"moved": [], "last": true}',
    "moves in an object": lambda: b'{"moved": {"4": 9}, "last": 1.0}',
    "a count that is a float": lambda: b'{"moved": [[4.0, 9, "ab"]], "last": 1.0}',
    "truncated": lambda: b'{"moved": [[4, 9, "0123',
    "nested 100,000 deep": lambda: b"[" * 100_000 + b"]" * 100_000,
    "not UTF-8": lambda: b'{"moved": [], "last": 1.0, "note": "\xff"}',
    "60 MB": huge,
}


def plant(root: Path, content: bytes) -> Path:
    """``content`` as the record of session ``s`` under ``root``, private as a workspace
    writes it."""
    folder = root / session_folder_name("s")
    folder.mkdir(mode=0o700, parents=True)
    record = folder / RECORD
    record.write_bytes(content)
    record.chmod(0o600)
    return record


@pytest.mark.parametrize("name", CORRUPT)
def test_a_corrupt_record_is_said_and_the_session_cleaned_as_without_one(
    name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        expected = session(pipe, IDLE)  # without a record
    shutil.rmtree(tmp_path / session_folder_name("s"))
    record = plant(tmp_path, CORRUPT[name]())
    with (
        caplog.at_level(logging.WARNING, "middleware.session.cold_cache"),
        middleware.Pipeline(policy(tmp_path), session_id="s") as pipe,
    ):
        cleaned = session(pipe, IDLE)
    assert [sent(r) for r in cleaned] == [sent(r) for r in expected]
    assert caplog.text.count("unreadable") == 1 and str(record) in caplog.text  # said once
    # The session's next move wrote it again, whole and readable.
    again = json.loads(record.read_text())
    assert again["last"] == IDLE[-1] and again["moved"]


def bytes_read() -> int:
    """What this thread has read so far, files included (Linux's I/O accounting)."""
    for line in Path("/proc/thread-self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/thread-self/io")


@pytest.mark.skipif(not Path("/proc/thread-self/io").exists(), reason="Linux's I/O accounting")
def test_a_record_over_the_cap_is_never_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plant(tmp_path, huge())
    workspace = SpillWorkspace("s", tmp_path)
    before = bytes_read()
    with caplog.at_level(logging.WARNING, "middleware.session.cold_cache"):
        cache = SessionCache(workspace)
    read = bytes_read() - before
    workspace.close()
    assert read < 4_096, f"{read:,} bytes read"  # its size said it all
    assert not cache.moved and cache.last is None
    assert "unreadable" in caplog.text


def test_a_record_too_large_to_read_back_is_not_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    workspace = SpillWorkspace("s", tmp_path)
    cache = SessionCache(workspace)
    cache.moved = {ColdMove(turn, turn, "0123456789abcdef") for turn in range(40_000)}
    cache.last = START
    with caplog.at_level(logging.WARNING, "middleware.session.cold_cache"):
        cache.save(create=True)
    workspace.close()
    assert not (tmp_path / session_folder_name("s") / RECORD).exists()
    assert (
        "40,000 moves take" in caplog.text and f"the {MAX_RECORD_BYTES:,} a record" in caplog.text
    )


def test_a_lock_never_let_go_leaves_the_record_as_it_was(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process stopped while it holds the record's lock delays the others' writes by
    :data:`.RECORD_LOCK_SECONDS` at most: then the record is not written this time."""
    fcntl = pytest.importorskip("fcntl", reason="no lock on Windows")
    monkeypatch.setattr(workspace_module, "RECORD_LOCK_SECONDS", 0.0)
    plant(tmp_path, b'{"moved": [], "last": 1.0}')
    lock = os.open(
        tmp_path / session_folder_name("s") / workspace_module.RECORD_LOCK,
        os.O_RDWR | os.O_CREAT,
        0o600,
    )
    fcntl.flock(lock, fcntl.LOCK_EX)  # another open of the file: as another process
    try:
        workspace = SpillWorkspace("s", tmp_path)
        cache = SessionCache(workspace)
        view = cache.request(300.0, START)
        view.made = ColdMove(4, 9, "0123456789abcdef")
        with caplog.at_level(logging.WARNING, "middleware.session.cold_cache"):
            cache.made(view)
        workspace.close()
    finally:
        os.close(lock)
    assert "not kept: cannot lock" in caplog.text
    record = tmp_path / session_folder_name("s") / RECORD
    assert json.loads(record.read_text()) == {"moved": [], "last": 1.0}
    assert cache.moved == {ColdMove(4, 9, "0123456789abcdef")}  # the move is still made
