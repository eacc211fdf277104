"""A request that continues its conversation's previous one is worked on in its new part
(issue 16, item 4), and comes out exactly as if it had been processed in full: the same
output bytes and the same report, whether it continued, or could not and fell back.

The reference is the same session through a pipeline without a cache, which never
continues (it cannot recognise the previous request's messages).
"""

from __future__ import annotations

import itertools
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from session_builders import replay, with_cache_marker

import middleware
from middleware.cache import DerivedCache
from middleware.plugin.host import PluginHost
from middleware.plugin.markers import hookimpl

#: A schedule that moves within a short session, so some requests continue and some do not.
BUSY = {"microcompact": {"schedule": {"trigger_tokens": 2_000, "step_turns": 2,
                                      "min_reclaim_tokens": 200, "rewrite_cost": 6}}}  # fmt: skip


def request(turns: int) -> list[dict[str, Any]]:
    """Anthropic: a task, then ``turns`` turns of one call and its result: mostly Bash,
    some over the result cap (spilled), all long enough to compact, one empty; every
    fourth an edit, whose old input is cleared."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find the failing test."}]
    for i in range(turns):
        size = 9_000 if i % 3 == 0 else 2_500
        output = (
            ""
            if i == 4
            else "\n".join(
                f"case {n} of step {i} passed in good time, all well" for n in range(size // 45)
            )
        )
        call: dict[str, Any] = {
            "type": "tool_use",
            "id": f"toolu_{i:04}",
            "name": "Bash",
            "input": {"command": f"pytest tests/unit -k mod{i} -v"},
        }
        if i % 4 == 1:  # an edit, whose old input is cleared
            call = {**call, "name": "Edit", "input": {
                "file_path": f"src/mod{i}.py", "old_string": f"# old {i}\n" * 120,
                "new_string": f"# new {i}\n" * 120}}  # fmt: skip
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Step {i}."}, call,
        ]})  # fmt: skip
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i:04}", "content": output},
        ]})  # fmt: skip
    return messages


def policy(root: Path, **overrides: Any) -> middleware.Policy:
    merged = {**BUSY, **overrides, "spill": {"root": str(root), "keep": True}}
    return middleware.load_policy(None, env={}, dotenv_path=False, overrides=merged)


def reference(root: Path, requests: list[list[dict[str, Any]]], **overrides: Any) -> list[Any]:
    with middleware.Pipeline(
        policy(root, **overrides), session_id="s", cache=DerivedCache(0)
    ) as pipe:
        return replay(pipe, requests)


def test_a_growing_session_continues_and_comes_out_the_same(tmp_path: Path) -> None:
    requests = [request(n) for n in range(1, 25)]
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        seen = replay(pipe, requests)
        continued = pipe.continued
    assert seen == reference(tmp_path, requests)
    reports = [json.loads(report) for _, report in seen]
    kinds = {a["kind"] for r in reports for a in r["actions"]}
    assert {"spilled", "summarized", "input_cleared", "empty_replaced"} <= kinds
    compacted = [sum(a["step"] == "microcompact" for a in r["actions"]) for r in reports]
    moves = sum(later > earlier for earlier, later in itertools.pairwise(compacted))
    assert moves >= 3  # the boundary moved, and the old turns were compacted again
    assert continued == len(requests) - 1  # every request after the first


def test_the_same_request_twice_continues_from_its_last_turn(tmp_path: Path) -> None:
    requests = [request(6), request(6), request(7)]
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        assert replay(pipe, requests) == reference(tmp_path, requests)
        assert pipe.continued == 2


@pytest.mark.parametrize(
    ("change", "continued"),
    [
        ("edited result", 1),  # from the first turn, before it
        ("edited call", 1),
        ("moved cache marker", 1),  # from the previous request's last turn
        ("removed message", 1),  # from the task message alone
        ("user message first", 1),  # from the last turn: the previous request's was cut
    ],
)
def test_a_history_that_changed_continues_from_the_turns_it_shares(
    tmp_path: Path, change: str, continued: int
) -> None:
    first, second = request(8), request(9)
    if change == "edited result":
        second[2]["content"][0]["content"] += "\nlate line"
    elif change == "edited call":
        second[3]["content"][1]["input"]["command"] = "ls"
    elif change == "moved cache marker":
        first, second = with_cache_marker(first), with_cache_marker(second)
    elif change == "removed message":
        del second[1:3]
    else:  # the new part opens with the user's message, not the model's turn
        second = [*first, {"role": "user", "content": "Also check the docs."}]
    requests = [first, second]
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        assert replay(pipe, requests) == reference(tmp_path, requests)
        assert pipe.continued == continued


def test_a_session_whose_cache_marker_moves_continues_every_request(tmp_path: Path) -> None:
    requests = [with_cache_marker(request(n)) for n in range(1, 25)]
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        assert replay(pipe, requests) == reference(tmp_path, requests)
        assert pipe.continued == len(requests) - 1


def test_a_decision_admitted_in_between_is_processed_in_full(tmp_path: Path) -> None:
    first, second = request(8), request(9)
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        pipe.process(first, format="anthropic")
        pipe.admit("Bash", "toolu_0003", "x" * 20_000)
        pipe.process(second, format="anthropic")
        assert pipe.continued == 0


def test_a_policy_reload_is_processed_in_full(tmp_path: Path) -> None:
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        pipe.process(request(8), format="anthropic")
        pipe.replace_policy(policy(tmp_path, budget={"max_result_chars": 4_000}))
        after = pipe.process(request(9), format="anthropic")
        assert pipe.continued == 0
    with middleware.Pipeline(
        policy(tmp_path, budget={"max_result_chars": 4_000}), session_id="s", cache=DerivedCache(0)
    ) as full:
        assert after.output == full.process(request(9), format="anthropic").output


@pytest.mark.parametrize(
    "overrides",
    [
        {"microcompact": {"keep_results": 2}},
        {
            "microcompact": {
                "schedule": {**BUSY["microcompact"]["schedule"], "window_tokens": 8_000}
            }
        },
        {"budget": {"context_aware": {"enabled": True, "window_tokens": 20_000}}},
        {"budget": {"freeze_decisions": True}},
    ],
    ids=["keep_results", "window_tokens", "context_aware", "freeze_decisions"],
)
def test_decisions_that_read_the_whole_history_never_continue(
    tmp_path: Path, overrides: dict[str, Any]
) -> None:
    requests = [request(n) for n in range(4, 14)]
    with middleware.Pipeline(policy(tmp_path, **overrides), session_id="s") as pipe:
        assert replay(pipe, requests) == reference(tmp_path, requests, **overrides)
        assert pipe.continued == 0


class HalvingBudget:
    """A third-party budget step: what it does to old turns is its own business."""

    @hookimpl
    def enforce_budget(self, conversation: Any, context: Any) -> None:
        return None


def test_a_third_party_step_means_every_request_in_full(tmp_path: Path) -> None:
    host = PluginHost.create(load_entrypoints=False)
    host.register(HalvingBudget(), name="halving")
    with middleware.Pipeline(policy(tmp_path), host=host, session_id="s") as pipe:
        replay(pipe, [request(n) for n in range(4, 10)])
        assert pipe.continued == 0


def test_conversations_interleaved_in_one_pipeline_each_continue(tmp_path: Path) -> None:
    other = [request(n) for n in range(1, 8)]
    for messages in other:
        messages[0] = {"role": "user", "content": "A subagent's task."}
    mine = [request(n) for n in range(1, 8)]
    requests = [r for pair in zip(mine, other, strict=True) for r in pair]
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        assert replay(pipe, requests) == reference(tmp_path, requests)
        assert pipe.continued >= 8


def test_a_report_edited_by_its_caller_leaves_the_next_alone(tmp_path: Path) -> None:
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        for n in range(1, 12):
            report = pipe.process(request(n), format="anthropic").report
            for action in report.actions:
                action.detail.clear()  # type: ignore[attr-defined]
        last = pipe.process(request(12), format="anthropic").report
        assert pipe.continued > 0
    expected = json.loads(reference(tmp_path, [request(12)])[0][1])
    assert json.loads(last.to_json()) == expected


def text_request(turns: int) -> list[dict[str, Any]]:
    """OpenAI chat, a text protocol: the model's command in its text, the output as the
    next user message."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You run shell commands."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    for i in range(turns):
        output = "\n".join(f"line {n} of run {i}: all fine here" for n in range(40 + 200 * (i % 3)))
        messages.append({"role": "assistant", "content": f"Run {i}.\n```bash\nmake test{i}\n```"})
        messages.append({"role": "user", "content": f"<output>\n{output}\n</output>"})
    return messages


def test_a_text_protocol_session_continues_and_comes_out_the_same(tmp_path: Path) -> None:
    rule = {"text_protocol": {"enabled": True, "pattern": "^<output>", "tool_name": "bash"}}
    requests = [text_request(n) for n in range(1, 16)]
    with middleware.Pipeline(policy(tmp_path, **rule), session_id="s") as pipe:
        seen = [
            (json.dumps(r.output), r.report.to_json())
            for r in (pipe.process(m, format="openai") for m in requests)
        ]
        assert pipe.continued == len(requests) - 1
    with middleware.Pipeline(
        policy(tmp_path, **rule), session_id="s", cache=DerivedCache(0)
    ) as full:
        expected = [
            (json.dumps(r.output), r.report.to_json())
            for r in (full.process(m, format="openai") for m in requests)
        ]
    assert seen == expected
    assert '"kind": "summarized"' in seen[-1][1]


def test_a_result_is_read_for_its_summary_once_and_only_once_it_is_old(
    tmp_path: Path, summaries_read: list[str]
) -> None:
    """Weighing a summary reads the whole text: a result just returned (a 50 MB log, say)
    is not read on every request while it is too young to be summarised, and a request
    that continues the previous one does not read again what that one read."""
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        for n in range(1, 16):
            messages = request(n)
            pipe.process(messages, format="anthropic")
            newest = messages[-1]["content"][0]["content"]
            assert newest not in summaries_read
        assert pipe.continued == 14
    assert summaries_read and len(summaries_read) == len(set(summaries_read))


def test_threads_continuing_one_conversation_at_once_come_out_the_same(tmp_path: Path) -> None:
    """One pipeline shared by threads that send the same growing conversation, each at its
    own pace: whichever request a thread continues from, its output and report are the
    ones of the request processed in full."""
    requests = [with_cache_marker(request(n)) for n in range(1, 16)]
    expected = reference(tmp_path, requests)
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:

        def run(offset: int) -> list[tuple[str, str]]:
            order = requests[offset:] + requests[:offset]
            seen = {id(m): replay(pipe, [m])[0] for m in order}
            return [seen[id(m)] for m in requests]

        with ThreadPoolExecutor(4) as pool:
            outcomes = list(pool.map(run, [0, 3, 7, 11]))
        assert pipe.continued > 0
    assert all(outcome == expected for outcome in outcomes)
