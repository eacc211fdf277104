"""Pairing choices that used to lose or change meaning (issue #13, items 7-10), in every
wire format: calls without a tool name, which duplicate result is kept, calls and results
that both lost their id, and the role of the last message."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

import middleware
from middleware.formats.wire.responses_items import is_model_item
from middleware.report import Action
from tests.pairing_builders import FORMATS, A, Call, Msg, R, Res, U, build, calls, flatten

MISSING = (
    "[Tool result missing — the tool execution was interrupted or failed silently. "
    "Do NOT retry this tool call. Analyze what went wrong and try a different approach.]"
)


@pytest.fixture(scope="module")
def pipe() -> Iterator[middleware.Pipeline]:
    with middleware.Pipeline.from_policy(None) as pipeline:
        yield pipeline


def run(
    pipe: middleware.Pipeline, messages: list[dict[str, Any]], fmt: str
) -> tuple[list[dict[str, Any]], list[Action]]:
    """Repair; check the output is valid, idempotent and the input untouched."""
    before = copy.deepcopy(messages)
    result = pipe.process(messages, format=fmt)
    assert messages == before, "the input was mutated"
    assert middleware.check_history(result.messages, fmt) == [], result.messages
    again = pipe.process(result.messages, format=fmt)
    assert not again.changed and again.messages == result.messages, "not idempotent"
    return result.messages, result.report.by_step("pairing")


def kinds(actions: list[Action]) -> list[str]:
    return sorted(a.kind for a in actions)


# -- item 7: calls with an empty or blank tool name ------------------------------------------


def _set_name(messages: list[dict[str, Any]], fmt: str, call_id: str, name: Any) -> None:
    """Give the call ``call_id`` the tool name ``name`` (``None``: no name at all)."""
    for message in messages:
        if fmt == "anthropic" and message["role"] == "assistant":
            targets = [b for b in message["content"] if b.get("id") == call_id]
        elif fmt == "openai" and message.get("tool_calls"):
            targets = [c["function"] for c in message["tool_calls"] if c["id"] == call_id]
        elif fmt == "responses" and message.get("call_id") == call_id:
            targets = [message] if message["type"] == "function_call" else []
        else:
            continue
        for target in targets:
            if name is None:
                del target["name"]
            else:
                target["name"] = name


@pytest.mark.parametrize("name", ["", "   ", "\t\n", None])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_call_without_a_tool_name_is_dropped_with_what_answers_it(
    pipe: middleware.Pipeline, fmt: str, name: Any
) -> None:
    history: list[Msg] = [
        U("go"),
        A("working", (Call("c1", "read"), Call("c2", "x", {"k": 1}))),
        R((Res("c1", "file body"), Res("c2", "the nameless call's output"))),
        A("done"),
    ]
    messages = build(history, fmt)
    _set_name(messages, fmt, "c2", name)
    assert "empty_name" in {v.code for v in middleware.check_history(messages, fmt)}
    out, actions = run(pipe, messages, fmt)
    assert flatten(out, fmt) == [
        ("user", "go"),
        ("assistant", "working", ("c1",)),
        ("result", "c1", "file body"),
        ("assistant", "done", ()),
    ]
    assert kinds(actions) == ["orphan_dropped", "unnamed_call_dropped"]
    dropped = next(a for a in actions if a.kind == "unnamed_call_dropped")
    assert dropped.tool_call_id == "c2" and dropped.message_index == (
        3 if fmt == "responses" else 1
    )
    arguments = dropped.detail["arguments"]
    assert arguments == ({"k": 1} if fmt == "anthropic" else '{"k": 1}')
    orphan = next(a for a in actions if a.kind == "orphan_dropped")
    assert orphan.detail["content"] == "the nameless call's output"


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_assistant_message_left_without_calls_or_text_is_removed(
    pipe: middleware.Pipeline, fmt: str
) -> None:
    history: list[Msg] = [U("go"), A(None, (Call("c1", ""),)), U("again"), A("done")]
    out, actions = run(pipe, build(history, fmt), fmt)
    assert flatten(out, fmt) == [("user", "go"), ("user", "again"), ("assistant", "done", ())]
    expected = ["unnamed_call_dropped"]
    if fmt != "responses":  # a Responses call item is the call itself
        expected.append("empty_message_removed")
    assert kinds(actions) == sorted(expected)


def test_an_openai_assistant_message_keeps_its_text_when_its_calls_go(
    pipe: middleware.Pipeline,
) -> None:
    history: list[Msg] = [U("go"), A("let me look", (Call("c1", ""),)), U("again")]
    out, actions = run(pipe, build(history, "openai"), "openai")
    assert out[1] == {"role": "assistant", "content": "let me look"}
    assert kinds(actions) == ["unnamed_call_dropped"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_tool_name_of_the_wrong_type_is_still_malformed(fmt: str) -> None:
    messages = build([U("go"), A(None, calls("c1"))], fmt)
    _set_name(messages, fmt, "c1", 5)
    with pytest.raises(middleware.HistoryError, match="must be a string"):
        middleware.check_history(messages, fmt)


# -- item 8: which duplicate result is kept --------------------------------------------------

RESTART = "A restart occurred while this tool was in progress"


def _two_results(fmt: str, first: Res, second: Res) -> list[dict[str, Any]]:
    return build([U("go"), A(None, calls("c1")), R((first, second)), A("done")], fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "placeholder",
    [
        Res("c1", MISSING),  # our own synthetic, from an earlier repair
        Res("c1", "aborted"),  # Codex CLI's synthetic output
        Res("c1", "No result provided"),  # pi's
        Res("c1", RESTART, is_error=True),  # an error result (Anthropic's is_error)
    ],
    ids=["ours", "codex", "pi", "error"],
)
def test_a_real_output_wins_over_an_earlier_error_or_synthetic_one(
    pipe: middleware.Pipeline, fmt: str, placeholder: Res
) -> None:
    messages = _two_results(fmt, placeholder, Res("c1", "the real output"))
    out, actions = run(pipe, messages, fmt)
    assert [e for e in flatten(out, fmt) if e[0] == "result"] == [
        ("result", "c1", "the real output")
    ]
    (dropped,) = actions
    assert dropped.kind == "duplicate_result_dropped"
    assert dropped.detail["content"] == placeholder.content


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_first_is_kept_among_equals(pipe: middleware.Pipeline, fmt: str) -> None:
    real = _two_results(fmt, Res("c1", "first"), Res("c1", "second"))
    out, _ = run(pipe, real, fmt)
    assert ("result", "c1", "first") in flatten(out, fmt)
    errors = _two_results(fmt, Res("c1", "aborted"), Res("c1", MISSING))
    out, _ = run(pipe, errors, fmt)
    assert ("result", "c1", "aborted") in flatten(out, fmt)


def test_an_error_flag_alone_marks_a_placeholder_in_anthropic(pipe: middleware.Pipeline) -> None:
    messages = _two_results(
        "anthropic", Res("c1", "tool failed: exit 1", is_error=True), Res("c1", "retried: ok")
    )
    out, actions = run(pipe, messages, "anthropic")
    assert out[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "retried: ok"}
    ]
    assert actions[0].detail["is_error"] is True


# -- item 9: a call and its result that both lost their id -----------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_idless_result_right_after_an_idless_call_answers_it(
    pipe: middleware.Pipeline, fmt: str
) -> None:
    history: list[Msg] = [U("go"), A(None, calls("")), R((Res("", "the real output"),)), A("ok")]
    out, actions = run(pipe, build(history, fmt), fmt)
    flat = flatten(out, fmt)
    generated = flat[1][2][0]
    assert generated.startswith("toolu_mw_" if fmt == "anthropic" else "call_mw_")
    assert flat == [
        ("user", "go"),
        ("assistant", None, (generated,)),
        ("result", generated, "the real output"),
        ("assistant", "ok", ()),
    ]
    assert kinds(actions) == ["id_generated", "result_paired_by_position"]
    paired = next(a for a in actions if a.kind == "result_paired_by_position")
    assert paired.tool_call_id == generated and paired.message_index == 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_positional_pairing_sits_beside_calls_with_ids(pipe: middleware.Pipeline, fmt: str) -> None:
    history: list[Msg] = [U("go"), A(None, calls("c1", "")), R((Res("c1", "a"), Res("", "b")))]
    out, actions = run(pipe, build(history, fmt), fmt)
    results = [e for e in flatten(out, fmt) if e[0] == "result"]
    assert [(e[1] == "c1", e[2]) for e in results] == [(True, "a"), (False, "b")]
    assert "synthetic_result" not in kinds(actions) and "orphan_dropped" not in kinds(actions)


@pytest.mark.parametrize("fmt", FORMATS)
def test_ambiguous_idless_pairs_are_not_guessed(pipe: middleware.Pipeline, fmt: str) -> None:
    history: list[Msg] = [U("go"), A(None, calls("", "")), R((Res("", "a"), Res("", "b")))]
    _, actions = run(pipe, build(history, fmt), fmt)
    assert kinds(actions).count("synthetic_result") == 2
    assert kinds(actions).count("orphan_dropped") == 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_idless_result_that_is_not_right_after_the_call_is_not_guessed(
    pipe: middleware.Pipeline, fmt: str
) -> None:
    history: list[Msg] = [U("go"), A(None, calls("")), U("wait"), R((Res("", "late"),))]
    _, actions = run(pipe, build(history, fmt), fmt)
    assert {"id_generated", "orphan_dropped", "synthetic_result"} <= set(kinds(actions))
    assert "result_paired_by_position" not in kinds(actions)


def test_positional_pairing_respects_responses_item_types(pipe: middleware.Pipeline) -> None:
    items = [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "custom_tool_call", "call_id": "", "name": "apply", "input": "x"},
        {"type": "function_call_output", "call_id": "", "output": "text"},
    ]
    out, actions = run(pipe, items, "responses")
    assert "result_paired_by_position" not in kinds(actions)
    assert out[2]["type"] == "custom_tool_call_output"


# -- item 10: the last role never changes -----------------------------------------------------


def _ends_on_user(messages: list[dict[str, Any]], fmt: str) -> bool:
    """Whether the last message is not the model's (Responses: not a model item)."""
    if fmt == "responses":
        return not is_model_item(messages[-1])
    return messages[-1]["role"] != "assistant"


@pytest.mark.parametrize(
    "tail",
    [
        [R((Res("ghost", "stale output"),))],  # an orphan-only last message
        [A(None, (Call("c9", ""),)), R((Res("c9", "nameless output"),))],  # a dropped call
    ],
    ids=["orphan", "unnamed_call"],
)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_history_ending_on_a_user_turn_still_does(
    pipe: middleware.Pipeline, fmt: str, tail: list[Msg]
) -> None:
    # Ending on the assistant message would make Anthropic continue it as a prefill.
    messages = build([U("go"), A("hi"), *tail], fmt)
    assert _ends_on_user(messages, fmt)
    out, actions = run(pipe, messages, fmt)
    assert _ends_on_user(out, fmt), out
    assert flatten(out, fmt)[:2] == [("user", "go"), ("assistant", "hi", ())]
    added = next(a for a in actions if a.kind == "user_turn_added")
    assert flatten(out[-1:], fmt) == [("user", added.detail["text"])]
    assert "orphan_dropped" in kinds(actions)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_history_that_would_be_left_empty_keeps_a_user_turn(
    pipe: middleware.Pipeline, fmt: str
) -> None:
    out, actions = run(pipe, build([R((Res("ghost", "stale"),))], fmt), fmt)
    assert len(out) == 1 and _ends_on_user(out, fmt)
    assert "user_turn_added" in kinds(actions)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_history_ending_on_the_assistant_is_left_so(pipe: middleware.Pipeline, fmt: str) -> None:
    messages = build([U("go"), R((Res("ghost", "stale"),)), A("prefill: ")], fmt)
    out, actions = run(pipe, messages, fmt)
    assert flatten(out, fmt)[-1] == ("assistant", "prefill: ", ())
    assert "user_turn_added" not in kinds(actions)
