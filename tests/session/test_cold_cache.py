"""A session whose prompt cache is cold is rewritten for free (issue 28, items 2 and 3):
after an idle gap past the cache's lifetime, after answers that read none of the cache,
or always with a policy that says the provider keeps none. A move made for the clock or
the answers is recorded, so the session's later requests, in this process or after a
restart, send the same bytes."""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware.cache import DerivedCache
from middleware.session.cold_cache import (
    MIN_EXPECTED_TOKENS,
    ColdMove,
    ColdRequest,
    SessionCache,
)
from middleware.spill.layout import RECORD, session_folder_name
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
    off = {"microcompact": {**THRIFTY["microcompact"], "schedule": {
        **THRIFTY["microcompact"]["schedule"], "cold_rewrites": False}}}  # fmt: skip
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
    next one reads when the session's last request was sent."""
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        session(pipe, [START, START + 20, START + 40])
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        (late,) = session(pipe, [START + 4_000], first=6)
    assert compacted(late)


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
    def __init__(self, text: str | None = None, fail: bool = False) -> None:
        self.text, self.fail = text, fail

    def load_record(self) -> str | None:
        return self.text

    def save_record(self, content: str, *, create: bool = True) -> None:
        if self.fail:
            raise OSError("disk full")
        self.text = content


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
    workspace.save_record("{}", create=False)  # no folder, none kept: nothing written
    assert not (tmp_path / session_folder_name("s")).exists()
    workspace.save_record('{"moved": [], "last": 1.0}')
    path = tmp_path / session_folder_name("s") / RECORD
    assert path.stat().st_mode & 0o777 == 0o600
    assert workspace.load_record() == '{"moved": [], "last": 1.0}'
    path.chmod(0o644)  # another user could have written it: not taken
    assert workspace.load_record() is None
    workspace.close()
