"""A request that continues the previous one of its session finds the protected window of
file reads from what the requests before found of the old calls (issue 47): it asks what
its new calls do with files, and indexes its new messages alone unless it compacts; and it
comes out exactly as the same request processed in full."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from read_builders import history, turn
from session_builders import replay

import middleware
from middleware.cache import DerivedCache
from middleware.steps.file_tools import FileTools
from middleware.view import Conversation, ResultSite, ToolCall

#: Numbered lines, as a read returns them, long enough to compact.
LINES = "".join(f"{n}\tvalue_{n:04d} = compute(x_{n}, y_{n})  # line {n}\n" for n in range(1, 81))


def step(kind: str, i: int) -> list[dict[str, Any]]:
    """One turn of ``kind``: reads of whole files and of parts, by the Read tool and by
    the shell, a write, a command that reads nothing."""
    file = "/repo/app.py" if i % 3 else f"/repo/m{i % 4}.py"
    made: dict[str, tuple[str, dict[str, Any], str]] = {
        "read": ("Read", {"file_path": file}, LINES),
        "part": ("Read", {"file_path": file, "offset": 10, "limit": 40}, LINES[:1500]),
        "cat": ("Bash", {"command": f"cat {file}"}, LINES),
        "sed": ("Bash", {"command": f"sed -n '1,40p' {file}"}, LINES[:1500]),
        "write": ("Write", {"file_path": file, "content": "x = 1\n"}, "ok"),
        "test": ("Bash", {"command": f"pytest -k case_{i}"}, f"case {i}: " + "ok\n" * 600),
    }
    name, arguments, output = made[kind]
    return turn(i, name, arguments, output)


def policy(root: Path, **schedule: Any) -> middleware.Policy:
    """Reads protected for a few turns and a small window, so that they are released by
    age, by the window and by being read again or written, within a short session."""
    return middleware.load_policy(None, env={}, dotenv_path=False, overrides={
        "spill": {"root": str(root), "keep": True},
        "microcompact": {
            "reads": {"protect_turns": 3, "protect_tokens": 1_500, "protect_part_turns": 5,
                      "protect_part_tokens": 3_000},
            "schedule": {"step_turns": 2, "rewrite_cost": 0, **schedule},
        },
    })  # fmt: skip


KINDS = st.sampled_from(["read", "part", "cat", "sed", "write", "test"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(KINDS, min_size=2, max_size=14))
def test_a_session_of_reads_continues_and_comes_out_as_processed_in_full(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str]
) -> None:
    turns = [step(kind, i) for i, kind in enumerate(kinds)]
    requests = [history(*turns[:k]) for k in range(1, len(turns) + 1)]
    root = tmp_path_factory.mktemp("warm")
    with middleware.Pipeline(policy(root), session_id="s") as pipe:
        seen = replay(pipe, requests)
        assert pipe.continued == len(requests) - 1
    with middleware.Pipeline(policy(root), session_id="s", cache=DerivedCache(0)) as full:
        assert seen == replay(full, requests)


def test_the_releases_of_reads_change_on_later_requests_alike(tmp_path: Path) -> None:
    """A read is released by a later read of its file, a write, or the window filling:
    all three reach requests that continue (the reads are summarised as in full)."""
    kinds = ["read", "part", "test", "cat", "read", "write", "sed", "test", "read", "test",
             "part", "cat", "test", "test"]  # fmt: skip
    turns = [step(kind, i) for i, kind in enumerate(kinds)]
    requests = [history(*turns[:k]) for k in range(1, len(turns) + 1)]
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        seen = replay(pipe, requests)
        assert pipe.continued == len(requests) - 1
    with middleware.Pipeline(policy(tmp_path), session_id="s", cache=DerivedCache(0)) as full:
        assert seen == replay(full, requests)
    summarized = [a for a in json.loads(seen[-1][1])["actions"] if a["kind"] == "summarized"]
    assert {a["tool_name"] for a in summarized} >= {"Read", "Bash"}


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the calls the plugins are asked about (what a call does with files)."""
    seen: list[str] = []
    use, call_use = FileTools.use, FileTools.call_use

    def spy_use(self: FileTools, site: ResultSite) -> Any:
        seen.append(site.result.call_id or "")
        return use(self, site)

    def spy_call_use(self: FileTools, call: ToolCall) -> Any:
        seen.append(call.id)
        return call_use(self, call)

    monkeypatch.setattr(FileTools, "use", spy_use)
    monkeypatch.setattr(FileTools, "call_use", spy_call_use)
    return seen


def test_a_continued_request_asks_about_its_new_calls_alone(
    tmp_path: Path, asked: list[str]
) -> None:
    kinds = ["read", "cat", "part", "write", "test", "sed"] * 3
    turns = [step(kind, i) for i, kind in enumerate(kinds)]
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        for k in range(1, len(turns) + 1):
            asked.clear()
            pipe.process(history(*turns[:k]), format="anthropic")
            assert pipe.continued == k - 1
            if k > 1:
                assert set(asked) <= {f"toolu_{k - 1:02d}"}, k
            else:
                assert set(asked) == {"toolu_00"}


def test_a_continued_request_that_compacts_nothing_new_indexes_its_new_messages_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A boundary that does not move leaves the old messages as the previous request
    made them: nothing reads the whole conversation again."""
    starts: list[int] = []
    index = Conversation.index

    def spy(self: Conversation, start: int = 0, first_turn: int = 0) -> Any:
        starts.append(start)
        return index(self, start, first_turn)

    monkeypatch.setattr(Conversation, "index", spy)
    kinds = ["read", "cat", "part", "write", "test", "sed"] * 3
    turns = [step(kind, i) for i, kind in enumerate(kinds)]
    never = policy(tmp_path, trigger_tokens=10_000_000)
    with middleware.Pipeline(never, session_id="s") as pipe:
        for k in range(1, len(turns) + 1):
            starts.clear()
            pipe.process(history(*turns[:k]), format="anthropic")
            assert starts, k
            assert (0 in starts) == (k == 1), (k, starts)
