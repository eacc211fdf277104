"""The agents' own compaction in a history: a Responses ``compaction`` item (opaque,
encrypted: the provider refuses one that comes back changed), Codex CLI's
``compaction_trigger`` (which must stay the last input item) and Anthropic's ``compaction``
blocks. Pairing repair works around them, wherever they sit (after a call without output,
alone in a turn, between a call and its output, before an orphan), and never changes,
drops, moves or reorders them; nothing is budgeted or summarised into them; the requests
Codex CLI 0.171 really sends through a compaction (tests/recorded/) need nothing."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from locations import RECORDED

import middleware

MISSING = (
    "[Tool result missing — the tool execution was interrupted or failed silently. "
    "Do NOT retry this tool call. Analyze what went wrong and try a different approach.]"
)
TRIGGER = {"type": "compaction_trigger"}


def user(text: str = "go") -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def compaction(n: int = 1) -> dict[str, Any]:
    return {"type": "compaction", "id": f"cmp_{n}", "encrypted_content": f"gAAAAA-sealed-{n}=="}


def call(call_id: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": "exec_command",
        "arguments": '{"cmd": "ls"}',
    }


def output(call_id: str, text: str = "a.py\n") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def synthetic(call_id: str) -> dict[str, Any]:
    return output(call_id, MISSING)


@pytest.fixture(scope="module")
def pipe() -> Iterator[middleware.Pipeline]:
    with middleware.Pipeline.from_policy(None) as pipeline:
        yield pipeline


def processed(
    pipe: middleware.Pipeline, history: list[dict[str, Any]], fmt: str = "responses"
) -> middleware.ProcessResult:
    """``history`` processed: the result valid by the provider's rules, the input
    untouched, a second pass changing nothing."""
    before = copy.deepcopy(history)
    result = pipe.process(history, format=fmt)
    assert history == before
    assert middleware.check_history(result.messages, fmt) == []
    assert pipe.process(result.messages, format=fmt).messages == result.messages
    return result


def kinds(result: middleware.ProcessResult) -> list[str]:
    return [action.kind for action in result.report.actions]


def codes(history: list[dict[str, Any]], fmt: str = "responses") -> list[tuple[int, str]]:
    return [(v.index, v.code) for v in middleware.check_history(history, fmt)]


# -- Responses -------------------------------------------------------------------------------


def test_a_call_without_output_before_a_compaction_gets_its_output_after_the_turn(
    pipe: middleware.Pipeline,
) -> None:
    """The compaction item is a model item: with the call before it, one turn, whose
    missing output goes after both; the item is sent as it came (the same object)."""
    item = compaction()
    history = [user(), call("c1"), item, user("next")]
    assert codes(history) == [(1, "missing_result")]
    result = processed(pipe, history)
    assert result.messages == [user(), call("c1"), item, synthetic("c1"), user("next")]
    assert result.messages[2] is item
    assert kinds(result) == ["synthetic_result"]


def test_a_turn_holding_only_a_compaction_item_is_left_alone(pipe: middleware.Pipeline) -> None:
    """Codex's history right after a mid-turn compaction ends on the item; a turn of the
    item alone between two prompts is valid too: nothing to repair, nothing changed."""
    for history in (
        [user(), compaction()],
        [compaction()],
        [user(), compaction(), user("go on"), call("c1"), output("c1")],
    ):
        assert codes(history) == []
        result = processed(pipe, history)
        assert not result.changed and result.report.actions == []
        assert all(a is b for a, b in zip(result.messages, history, strict=True))


def test_an_output_after_the_compaction_item_of_its_turn_answers_its_call(
    pipe: middleware.Pipeline,
) -> None:
    """Responses pairs by call id: the item between a call and its output (the output
    after the call's turn, which the item belongs to) breaks nothing."""
    history = [user(), call("c1"), compaction(), output("c1")]
    assert codes(history) == []
    assert not processed(pipe, history).changed


def test_a_compaction_item_beside_a_missing_output_of_the_trigger_request(
    pipe: middleware.Pipeline,
) -> None:
    """A call after the compaction item left unanswered in a compaction request: its
    output is written before the trigger, which stays the last item, unchanged."""
    history = [user(), compaction(), call("c1"), output("c1"), call("c2"), TRIGGER]
    assert codes(history) == [(4, "missing_result")]
    result = processed(pipe, history)
    assert result.messages == [user(), compaction(), call("c1"), output("c1"), call("c2"),
                               synthetic("c2"), TRIGGER]  # fmt: skip
    assert result.messages[-1] is history[-1]


def test_an_orphan_after_a_compaction_item_is_dropped_and_the_item_kept(
    pipe: middleware.Pipeline,
) -> None:
    """An output whose call went with the compacted history is an orphan: dropped and
    reported with its content; the item stays, and the request still ends on a user
    turn (the item is the model's)."""
    item = compaction()
    history = [user(), item, output("c9", "old output")]
    assert codes(history) == [(2, "orphan_result")]
    result = processed(pipe, history)
    assert result.messages[:2] == [user(), item] and result.messages[1] is item
    assert result.messages[2]["role"] == "user"
    assert kinds(result) == ["orphan_dropped", "user_turn_added"]
    assert result.report.actions[0].detail["content"] == "old output"


def test_an_output_displaced_behind_the_next_turn_past_a_compaction_item(
    pipe: middleware.Pipeline,
) -> None:
    """An output behind the next turn is not claimed by the earlier one: dropped, the call
    before the item answered by a synthetic output after it; both items unchanged."""
    history = [user(), call("c1"), compaction(1), user("b"), compaction(2), call("c2"),
               output("c2"), output("c1")]  # fmt: skip
    result = processed(pipe, history)
    assert result.messages == [user(), call("c1"), compaction(1), synthetic("c1"), user("b"),
                               compaction(2), call("c2"), output("c2")]  # fmt: skip
    assert kinds(result) == ["orphan_dropped", "synthetic_result"]


def test_a_large_output_beside_a_compaction_is_budgeted_and_the_item_is_not(
    pipe: middleware.Pipeline,
) -> None:
    """Budgets are for tool outputs: the output over the cap is spilled; the compaction
    item, larger still, and the trigger go as they came."""
    item = {**compaction(), "encrypted_content": "gAAAAA" + "Q" * 200_000}
    big = "".join(f"row {i:05d} {'x' * 80}\n" for i in range(2_000))
    history = [user(), item, call("c1"), output("c1", big), TRIGGER]
    result = processed(pipe, history)
    assert kinds(result) == ["spilled"]
    assert result.messages[1] is item and result.messages[-1] is history[-1]
    assert len(result.messages[3]["output"]) < len(big)


def test_what_codex_sends_through_a_compaction_needs_nothing(pipe: middleware.Pipeline) -> None:
    """The requests Codex CLI 0.171 sent through its remote compaction (the trigger
    request, the requests carrying the compaction item, the resumed one): valid as they
    are, returned as they came."""
    recording = json.loads((RECORDED / "codex-0.171.0-compaction.json").read_text("utf-8"))
    for request in recording["requests"]:
        body = request["body"]
        assert codes(body["input"]) == []
        result = pipe.process(body, format="responses")
        assert not result.changed and result.output == body


ITEMS = st.sampled_from(["user", "call", "output", "compaction", "reasoning", "assistant"])
IDS = st.sampled_from(["c1", "c2", "c3"])


@st.composite
def responses_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Prompts, calls, outputs, compaction items, reasoning and assistant messages in any
    order, ending on a ``compaction_trigger`` half of the time."""
    out: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 12))):
        kind = draw(ITEMS)
        if kind == "user":
            out.append(user(f"prompt {n}"))
        elif kind == "call":
            out.append(call(draw(IDS)))
        elif kind == "output":
            out.append(output(draw(IDS), f"out {n}"))
        elif kind == "compaction":
            out.append(compaction(n))
        elif kind == "reasoning":
            out.append(
                {"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": f"r{n}"}
            )
        else:
            out.append({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": f"said {n}"}]})  # fmt: skip
    if draw(st.booleans()):
        out.append(dict(TRIGGER))
    return out


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(history=responses_histories())
def test_repairs_never_change_drop_or_reorder_compaction_items(
    pipe: middleware.Pipeline, history: list[dict[str, Any]]
) -> None:
    """Whatever the repair does, the compaction items come out as they came, in their
    order, and a trigger that was last is last, once."""
    result = processed(pipe, history)
    compactions = [item for item in history if item.get("type") == "compaction"]
    assert [item for item in result.messages if item.get("type") == "compaction"] == compactions
    triggers = [item for item in result.messages if item.get("type") == "compaction_trigger"]
    if history[-1] == TRIGGER:
        assert result.messages[-1] == TRIGGER and len(triggers) == 1


# -- Anthropic -------------------------------------------------------------------------------


def block(n: int = 1) -> dict[str, Any]:
    """A ``compaction`` block as the compact_20260112 edit returns it."""
    return {
        "type": "compaction",
        "content": f"Summary {n} of the earlier turns.",
        "encrypted_content": f"sealed-{n}",
    }


def use(tool_id: str, name: str = "Bash") -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {"command": "ls"}}


def result_block(tool_id: str, text: str = "a.py") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": text}


def said(role: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "content": list(blocks)}


def test_anthropic_compaction_blocks_beside_calls(pipe: middleware.Pipeline) -> None:
    """A compaction block heads the assistant message that compacted: its call answered,
    the message as it came; its call unanswered, a result after it and the block
    unchanged; a call without a name dropped, the block (and so the message) kept."""
    answered = [
        said("user", {"type": "text", "text": "go"}),
        said("assistant", block(), use("t1")),
        said("user", result_block("t1")),
    ]
    assert codes(answered, "anthropic") == []
    assert not processed(pipe, answered, "anthropic").changed

    unanswered = [
        answered[0],
        said("assistant", block(), use("t1")),
        said("user", {"type": "text", "text": "next"}),
    ]
    result = processed(pipe, unanswered, "anthropic")
    assert result.messages[1] is unanswered[1]
    assert result.messages[2]["content"][0]["tool_use_id"] == "t1"
    assert kinds(result) == ["synthetic_result"]

    unnamed = [
        answered[0],
        said("assistant", block(), use("t1", name="")),
        said("user", result_block("t1")),
    ]
    result = processed(pipe, unnamed, "anthropic")
    assert result.messages[1] == said("assistant", block())
    assert kinds(result) == [
        "unnamed_call_dropped",
        "orphan_dropped",
        "empty_message_removed",
        "user_turn_added",
    ]


def test_an_anthropic_turn_of_a_compaction_block_alone(pipe: middleware.Pipeline) -> None:
    """With ``pause_after_compaction`` the answer is the block alone, sent back as the last
    message: left as it is; an orphan result after it is dropped around it."""
    paused = [
        said("user", {"type": "text", "text": "go"}),
        said("assistant", use("t1")),
        said("user", result_block("t1")),
        said("assistant", block()),
    ]
    assert not processed(pipe, paused, "anthropic").changed
    orphan = [paused[0], said("assistant", block()), said("user", result_block("t9"))]
    result = processed(pipe, orphan, "anthropic")
    assert result.messages[1] is orphan[1]
    assert kinds(result) == ["orphan_dropped", "empty_message_removed", "user_turn_added"]


@st.composite
def anthropic_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Messages of either role with compaction blocks, calls, results and text anywhere
    their role allows."""
    out: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 8))):
        if draw(st.booleans()):
            kinds = draw(
                st.lists(st.sampled_from(["compaction", "use", "text"]), min_size=1, max_size=3)
            )
            blocks = [
                block(n * 10 + k)
                if kind == "compaction"
                else use(draw(st.sampled_from(["t1", "t2"])))
                if kind == "use"
                else {"type": "text", "text": f"said {n}"}
                for k, kind in enumerate(kinds)
            ]
            out.append(said("assistant", *blocks))
        else:
            kinds = draw(st.lists(st.sampled_from(["result", "text"]), min_size=1, max_size=2))
            blocks = [
                result_block(draw(st.sampled_from(["t1", "t2"])))
                if kind == "result"
                else {"type": "text", "text": f"asked {n}"}
                for kind in kinds
            ]
            out.append(said("user", *blocks))
    return out


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(history=anthropic_histories())
def test_anthropic_repairs_never_change_drop_or_reorder_compaction_blocks(
    pipe: middleware.Pipeline, history: list[dict[str, Any]]
) -> None:
    """Whatever the repair does, every compaction block comes out as it came, in its
    order, in an assistant message."""
    result = processed(pipe, history, "anthropic")

    def blocks(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        return [
            (m["role"], b)
            for m in messages
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "compaction"
        ]

    assert blocks(result.messages) == blocks(history)
