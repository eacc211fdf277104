"""Pairing repair: ChatCLI's twelve cases (chatcli-behaviour.md §2.4) in every format, and
each deliberate difference from ChatCLI (docs/pairing.md)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware.policy.schema import default_of
from middleware.report import Action
from middleware.steps.pairing.step import KEPT_TURN_TEXT
from tests.pairing_builders import FORMATS, A, Call, Msg, R, Res, S, U, build, calls, flatten
from tests.pairing_builders import results as res

#: ChatCLI's synthetic result text, byte for byte (the dashes are U+2014 em dashes).
MISSING = (
    "[Tool result missing — the tool execution was interrupted or failed silently. "
    "Do NOT retry this tool call. Analyze what went wrong and try a different approach.]"
)

TOOL_USE_T1 = {"type": "tool_use", "id": "t1", "name": "x", "input": {}}


@pytest.fixture(scope="module")
def pipe() -> Iterator[middleware.Pipeline]:
    # These vectors keep ChatCLI's ids (`wf:0`), which the Anthropic API would reject:
    # sanitising is tested on its own (test_ids_the_anthropic_api_rejects_are_renamed).
    policy = middleware.load_policy(
        None, env={}, dotenv_path=False, overrides={"pairing.sanitize_ids": False}
    )
    with middleware.Pipeline(policy) as pipeline:
        yield pipeline


def run(
    pipe: middleware.Pipeline, history: list[Msg], fmt: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Action]]:
    """Build, repair, check the invariants every repair keeps; return (input, output, actions)."""
    messages = build(history, fmt)
    before = copy.deepcopy(messages)
    result = pipe.process(messages, format=fmt)
    assert messages == before, "the input was mutated"
    violations = middleware.check_history(result.messages, fmt)
    assert [v for v in violations if v.code != "invalid_id"] == []
    again = pipe.process(result.messages, format=fmt)
    assert not again.changed and again.messages == result.messages, "not idempotent"
    return messages, result.messages, result.report.by_step("pairing")


def kinds(actions: list[Action]) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in actions:
        out[a.kind] = out.get(a.kind, 0) + 1
    return out


def syn(call_id: str) -> tuple[str, str, str]:
    return ("result", call_id, MISSING)


WF = ("wf:0", "wf:1")


# -- ChatCLI's cases -------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_1_valid_history_comes_back_as_the_same_objects(
    pipe: middleware.Pipeline, fmt: str
) -> None:
    history: list[Msg] = [
        S("sys"),
        U("go"),
        A(None, calls(*WF)),
        res(("wf:0", "a"), ("wf:1", "b")),
        A("done"),
    ]
    messages, out, actions = run(pipe, history, fmt)
    assert actions == []
    assert len(out) == len(messages) and all(a is b for a, b in zip(out, messages, strict=True))


@pytest.mark.parametrize("fmt", FORMATS)
def test_2_later_block_reusing_ids_dangles(pipe: middleware.Pipeline, fmt: str) -> None:
    history: list[Msg] = [
        U("go"),
        A(None, calls(*WF)),
        res(("wf:0", "a"), ("wf:1", "b")),
        A(None, calls(*WF)),
        U("[batch feedback]"),
    ]
    _, out, actions = run(pipe, history, fmt)
    # Anthropic wants ids unique across the request: the second block is renamed.
    second = ("wf:0__2", "wf:1__2") if fmt == "anthropic" else WF
    assert flatten(out, fmt) == [
        ("user", "go"), ("assistant", None, WF), ("result", "wf:0", "a"), ("result", "wf:1", "b"),
        ("assistant", None, second), syn(second[0]), syn(second[1]), ("user", "[batch feedback]"),
    ]  # fmt: skip
    expected = {"synthetic_result": 2}
    if fmt == "anthropic":
        expected["id_renamed"] = 2
    assert kinds(actions) == expected
    if fmt == "anthropic":
        # The synthetics are merged into the following user message, before its text.
        assert len(out) == 5 and out[4]["content"][2] == {
            "type": "text",
            "text": "[batch feedback]",
        }
    else:  # ChatCLI: length 8 (Responses items: each call is an item of its own)
        assert len(out) == len(build(history, fmt)) + 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_3_dangling_first_block_later_block_answered(pipe: middleware.Pipeline, fmt: str) -> None:
    history: list[Msg] = [
        A(None, calls(*WF)),
        U("[legacy batch feedback]"),
        A(None, calls(*WF)),
        res(("wf:0", "fresh-a"), ("wf:1", "fresh-b")),
    ]
    _, out, actions = run(pipe, history, fmt)
    second = ("wf:0__2", "wf:1__2") if fmt == "anthropic" else WF
    assert flatten(out, fmt) == [
        ("assistant", None, WF),
        syn("wf:0"),
        syn("wf:1"),
        ("user", "[legacy batch feedback]"),
        ("assistant", None, second),
        ("result", second[0], "fresh-a"),
        ("result", second[1], "fresh-b"),
    ]
    assert kinds(actions)["synthetic_result"] == 2
    assert "orphan_dropped" not in kinds(actions)


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_4_interposed_message_relocates_results(pipe: middleware.Pipeline, fmt: str) -> None:
    history: list[Msg] = [
        A(None, calls(*WF)),
        U("SECURITY BLOCK: something"),
        res(("wf:0", "a"), ("wf:1", "b")),
    ]
    _, out, actions = run(pipe, history, fmt)
    assert flatten(out, fmt) == [
        ("assistant", None, WF),
        ("result", "wf:0", "a"),
        ("result", "wf:1", "b"),
        ("user", "SECURITY BLOCK: something"),
    ]
    assert kinds(actions).get("result_relocated") == 2
    assert "synthetic_result" not in kinds(actions)
    if fmt == "anthropic":  # one user message: tool_result blocks first, then the text
        assert len(out) == 2
        assert [b["type"] for b in out[1]["content"]] == ["tool_result", "tool_result", "text"]


def test_4_responses_pairs_by_call_id_so_an_interposed_message_is_valid(
    pipe: middleware.Pipeline,
) -> None:
    history: list[Msg] = [
        A(None, calls(*WF)),
        U("SECURITY BLOCK: something"),
        res(("wf:0", "a"), ("wf:1", "b")),
    ]
    messages, out, actions = run(pipe, history, "responses")
    assert actions == [] and all(a is b for a, b in zip(out, messages, strict=True))


@pytest.mark.parametrize("fmt", FORMATS)
def test_5_orphan_result_removed_with_its_content_reported(
    pipe: middleware.Pipeline, fmt: str
) -> None:
    history: list[Msg] = [U("go"), res(("ghost:0", "the ghost's output")), A("done")]
    _, out, actions = run(pipe, history, fmt)
    assert flatten(out, fmt) == [("user", "go"), ("assistant", "done", ())]
    orphan = next(a for a in actions if a.kind == "orphan_dropped")
    assert orphan.tool_call_id == "ghost:0" and orphan.message_index == 1
    assert orphan.detail["content"] == "the ghost's output"
    assert orphan.chars_before == len("the ghost's output") and orphan.chars_after == 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_6_partial_results_get_synthetics(pipe: middleware.Pipeline, fmt: str) -> None:
    history: list[Msg] = [
        A(None, (Call("wf:0"), Call("wf:1"), Call("park:2", "park"))),
        res(("wf:0", "only this ran")),
    ]
    _, out, actions = run(pipe, history, fmt)
    assert flatten(out, fmt) == [
        ("assistant", None, ("wf:0", "wf:1", "park:2")),
        ("result", "wf:0", "only this ran"),
        syn("wf:1"),
        syn("park:2"),
    ]
    missing = [(a.tool_call_id, a.tool_name) for a in actions if a.kind == "synthetic_result"]
    assert missing == [("wf:1", "web_fetch"), ("park:2", "park")]
    # The input index of the message holding each call (Responses: one item per call).
    assert [a.message_index for a in actions] == ([1, 2] if fmt == "responses" else [0, 0])


@pytest.mark.parametrize("fmt", FORMATS)
def test_7_intra_message_duplicate_call_dropped(pipe: middleware.Pipeline, fmt: str) -> None:
    history: list[Msg] = [A(None, calls("dup:0", "dup:0")), res(("dup:0", "once"))]
    _, out, actions = run(pipe, history, fmt)
    assert flatten(out, fmt) == [("assistant", None, ("dup:0",)), ("result", "dup:0", "once")]
    assert kinds(actions) == {"duplicate_call_dropped": 1}
    if fmt == "responses":  # each call is an item: the repeated item goes
        assert len(out) == 2


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_8_result_behind_a_same_turn_assistant_message_is_relocated(
    pipe: middleware.Pipeline, fmt: str
) -> None:
    # ChatCLI deletes "late" and answers wf:0 with a synthetic; the two assistant messages
    # are one turn here, so the real result is moved next to its call instead.
    # The history ended on a user turn and still does (a last assistant message would be a
    # prefill), so a user message takes the moved result's place at the end.
    history: list[Msg] = [A(None, calls("wf:0")), A("interleaved"), res(("wf:0", "late"))]
    _, out, actions = run(pipe, history, fmt)
    assert flatten(out, fmt) == [
        ("assistant", None, ("wf:0",)),
        ("result", "wf:0", "late"),
        ("assistant", "interleaved", ()),
        ("user", KEPT_TURN_TEXT),
    ]
    assert kinds(actions) == {
        "result_relocated": 1,
        "user_turn_added": 1,
        **({"empty_message_removed": 1} if fmt == "anthropic" else {}),
    }


def test_8_responses_same_turn_result_is_already_valid(pipe: middleware.Pipeline) -> None:
    history: list[Msg] = [A(None, calls("wf:0")), A("interleaved"), res(("wf:0", "late"))]
    messages, out, actions = run(pipe, history, "responses")
    assert actions == [] and out == messages


@pytest.mark.parametrize("fmt", FORMATS)
def test_8_result_beyond_the_next_turn_is_not_claimed(pipe: middleware.Pipeline, fmt: str) -> None:
    history: list[Msg] = [
        A(None, calls("wf:0")),
        U("more?"),
        A("interleaved"),
        res(("wf:0", "late")),
    ]
    _, out, actions = run(pipe, history, fmt)
    assert flatten(out, fmt) == [
        ("assistant", None, ("wf:0",)),
        syn("wf:0"),
        ("user", "more?"),
        ("assistant", "interleaved", ()),
        ("user", KEPT_TURN_TEXT),
    ]
    counts = kinds(actions)
    assert counts["synthetic_result"] == 1 and counts["orphan_dropped"] == 1
    orphan = next(a for a in actions if a.kind == "orphan_dropped")
    assert orphan.detail["content"] == "late"


@pytest.mark.parametrize("fmt", FORMATS)
def test_9_synthetics_are_error_marked(pipe: middleware.Pipeline, fmt: str) -> None:
    _, out, actions = run(pipe, [A(None, calls("wf:0"))], fmt)
    assert len(out) == 2 and flatten(out, fmt)[1] == syn("wf:0")
    if fmt == "anthropic":
        assert out[1] == {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "wf:0", "content": MISSING, "is_error": True}
            ],
        }
    elif fmt == "openai":
        assert out[1] == {"role": "tool", "tool_call_id": "wf:0", "content": MISSING}
    else:
        assert out[1] == {"type": "function_call_output", "call_id": "wf:0", "output": MISSING}
    assert kinds(actions) == {"synthetic_result": 1}


@pytest.mark.parametrize("fmt", FORMATS)
def test_10_empty_id_call_is_kept_with_a_generated_id(pipe: middleware.Pipeline, fmt: str) -> None:
    history: list[Msg] = [A(None, calls("", "wf:1")), res(("wf:1", "ok"))]
    _, out, actions = run(pipe, history, fmt)  # run() also checks a second pass is a no-op
    flat = flatten(out, fmt)
    generated = flat[0][2][0]
    prefix = "toolu_mw_" if fmt == "anthropic" else "call_mw_"
    assert generated.startswith(prefix) and flat[0][2][1] == "wf:1"
    assert sorted(flat[1:]) == sorted([("result", "wf:1", "ok"), syn(generated)])
    assert kinds(actions) == {"id_generated": 1, "synthetic_result": 1}
    # Deterministic: the same history always gets the same id.
    assert pipe.process(build(history, fmt), format=fmt).messages == out


@pytest.mark.parametrize("fmt", FORMATS)
def test_11_out_of_order_adjacent_results_are_valid(pipe: middleware.Pipeline, fmt: str) -> None:
    history: list[Msg] = [A(None, calls(*WF)), res(("wf:1", "b"), ("wf:0", "a"))]
    messages, out, actions = run(pipe, history, fmt)
    assert actions == [] and all(a is b for a, b in zip(out, messages, strict=True))


@pytest.mark.parametrize("fmt", FORMATS)
def test_12_pending_calls_are_scoped_to_the_last_block(fmt: str) -> None:
    def pairing_violations(messages: list[dict[str, Any]]) -> list[middleware.Violation]:
        return [v for v in middleware.check_history(messages, fmt) if v.code != "invalid_id"]

    pending = build([A(None, calls(*WF)), res(("wf:0", "a"))], fmt)
    (violation,) = pairing_violations(pending)
    assert violation.code == "missing_result" and "wf:1" in violation.reason
    assert "wf:0" not in violation.reason.replace("wf:0,", "")
    answered = build([A(None, calls(*WF)), res(("wf:0", "a"), ("wf:1", "b"))], fmt)
    assert pairing_violations(answered) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_moonshot_wire_shape_is_repaired(pipe: middleware.Pipeline, fmt: str) -> None:
    history: list[Msg] = [
        S("sys"),
        U("go"),
        A(None, calls(*WF)),
        res(("wf:0", "r0"), ("wf:1", "r1")),
        A("report", calls(*WF)),
        U("[@park completed] outcome=elapsed"),
    ]
    assert middleware.check_history(build(history, fmt), fmt) != []
    _, _, actions = run(pipe, history, fmt)  # run() asserts the output validates
    assert kinds(actions)["synthetic_result"] == 2


# -- deliberate differences from ChatCLI -----------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_repair_never_reorders_valid_blocks(pipe: middleware.Pipeline, fmt: str) -> None:
    # ChatCLI re-emits every block in call order once anything is repaired.
    history: list[Msg] = [
        U("go"),
        A(None, calls("c1", "c2")),
        res(("c2", "b"), ("c1", "a")),
        A(None, calls("c3")),
        U("interrupted"),
    ]
    messages, out, _ = run(pipe, history, fmt)
    first_changed = len(build(history[:4], fmt))  # everything up to the dangling call
    assert all(a is b for a, b in zip(out[:first_changed], messages, strict=False))


@pytest.mark.parametrize("fmt", FORMATS)
def test_duplicate_results_are_dropped_with_their_content(
    pipe: middleware.Pipeline, fmt: str
) -> None:
    history: list[Msg] = [A(None, calls("c1")), res(("c1", "first"), ("c1", "second"))]
    _, out, actions = run(pipe, history, fmt)
    assert flatten(out, fmt) == [("assistant", None, ("c1",)), ("result", "c1", "first")]
    (dup,) = actions
    assert dup.kind == "duplicate_result_dropped" and dup.detail["content"] == "second"
    assert dup.tool_name == "web_fetch"


@pytest.mark.parametrize("fmt", FORMATS)
def test_results_with_empty_ids_are_orphans(pipe: middleware.Pipeline, fmt: str) -> None:
    history: list[Msg] = [A(None, calls("c1")), R((Res("c1", "a"), Res("", "nameless")))]
    _, out, actions = run(pipe, history, fmt)
    assert flatten(out, fmt) == [("assistant", None, ("c1",)), ("result", "c1", "a")]
    (orphan,) = actions
    assert orphan.kind == "orphan_dropped" and orphan.tool_call_id == ""
    assert orphan.detail["content"] == "nameless"


def test_anthropic_results_spread_over_user_messages_are_merged_first(
    pipe: middleware.Pipeline,
) -> None:
    history: list[Msg] = [
        U("go"),
        A(None, calls("c1", "c2")),
        res(("c1", "a")),
        U("note"),
        res(("c2", "b")),
    ]
    _, out, actions = run(pipe, history, "anthropic")
    assert [m["role"] for m in out] == ["user", "assistant", "user", "user"]
    assert [b["tool_use_id"] for b in out[2]["content"]] == ["c1", "c2"]
    assert out[3] == {"role": "user", "content": "note"}
    assert kinds(actions) == {"result_relocated": 1, "empty_message_removed": 1}


def test_anthropic_text_before_results_is_moved_after_them(pipe: middleware.Pipeline) -> None:
    messages = [
        {"role": "assistant", "content": [TOOL_USE_T1]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "first"},
                {"type": "tool_result", "tool_use_id": "t1", "content": "r"},
            ],
        },
    ]
    assert [v.code for v in middleware.check_history(messages)] == ["result_not_first"]
    out = pipe.process(messages).messages
    assert [b["type"] for b in out[1]["content"]] == ["tool_result", "text"]
    assert middleware.check_history(out) == []


def test_anthropic_rename_keeps_the_id_pattern_and_length() -> None:
    long_id = "toolu_" + "a" * 58  # 64 characters
    history: list[Msg] = [
        A(None, calls(long_id)),
        res((long_id, "a")),
        A(None, calls(long_id)),
        res((long_id, "b")),
    ]
    with middleware.Pipeline.from_policy(None) as pipe:
        _, out, actions = run(pipe, history, "anthropic")
    renamed = out[2]["content"][0]["id"]
    assert renamed == long_id[:61] + "__2" and len(renamed) == 64
    assert out[3]["content"][0]["tool_use_id"] == renamed
    (action,) = actions
    assert action.kind == "id_renamed" and action.detail["original_id"] == long_id


def test_anthropic_rename_avoids_ids_already_in_use(pipe: middleware.Pipeline) -> None:
    history: list[Msg] = [
        A(None, calls("t")),
        res(("t", "a")),
        A(None, calls("t")),
        res(("t", "b")),
        A(None, calls("t__2")),
        res(("t__2", "c")),
    ]
    _, out, _ = run(pipe, history, "anthropic")
    assert [e[2] for e in flatten(out, "anthropic") if e[0] == "assistant"] == [
        ("t",),
        ("t__3",),
        ("t__2",),
    ]


@pytest.mark.parametrize("fmt", ["openai", "responses"])
def test_ids_reused_in_later_turns_are_legal_outside_anthropic(
    pipe: middleware.Pipeline, fmt: str
) -> None:
    history: list[Msg] = [
        A(None, calls(*WF)),
        res(("wf:0", "a"), ("wf:1", "b")),
        A(None, calls(*WF)),
        res(("wf:0", "c"), ("wf:1", "d")),
    ]
    messages, out, actions = run(pipe, history, fmt)
    assert actions == [] and all(a is b for a, b in zip(out, messages, strict=True))


def test_openai_consecutive_assistant_messages_get_their_own_results(
    pipe: middleware.Pipeline,
) -> None:
    history: list[Msg] = [A(None, calls("c1")), A(None, calls("c2")), res(("c1", "a"), ("c2", "b"))]
    _, out, _ = run(pipe, history, "openai")
    assert flatten(out, "openai") == [
        ("assistant", None, ("c1",)),
        ("result", "c1", "a"),
        ("assistant", None, ("c2",)),
        ("result", "c2", "b"),
    ]


def test_responses_synthetic_goes_after_adjacent_outputs_before_other_items(
    pipe: middleware.Pipeline,
) -> None:
    history: list[Msg] = [A("thinking aloud", calls("c1", "c2")), res(("c1", "a")), U("next")]
    messages, out, _ = run(pipe, history, "responses")
    assert flatten(out, "responses") == [
        ("assistant", "thinking aloud", ("c1", "c2")),
        ("result", "c1", "a"),
        syn("c2"),
        ("user", "next"),
    ]
    assert all(a is b for a, b in zip(out[:4], messages, strict=False))


def test_responses_custom_tool_call_gets_a_custom_output(pipe: middleware.Pipeline) -> None:
    messages = [{"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "x"}]
    out = pipe.process(messages, format="responses").messages
    assert out[1] == {"type": "custom_tool_call_output", "call_id": "c1", "output": MISSING}
    assert middleware.check_history(out, "responses") == []


def test_text_protocol_results_are_never_touched(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\ntext_protocol:\n  enabled: true\n  pattern: '<output>'\n")
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "ls"},
        {"role": "user", "content": "<output>a.py</output>"},
        {"role": "tool", "tool_call_id": "ghost", "content": "orphan"},
    ]
    with middleware.Pipeline.from_policy(policy) as pipe:
        result = pipe.process(messages, format="openai")
    assert result.messages == messages[:3]
    assert result.messages[2] is messages[2]
    assert [a.kind for a in result.report.by_step("pairing")] == ["orphan_dropped"]


def test_policy_sets_the_text_and_can_switch_pairing_off(tmp_path: Path) -> None:
    custom = tmp_path / "custom.yaml"
    custom.write_text("version: 1\npairing:\n  missing_result_text: '[no result]'\n")
    off = tmp_path / "off.yaml"
    off.write_text("version: 1\npairing:\n  enabled: false\n")
    messages = build([A(None, calls("c1"))], "openai")
    with middleware.Pipeline.from_policy(custom) as pipe:
        assert pipe.process(messages).messages[1]["content"] == "[no result]"
    with middleware.Pipeline.from_policy(off) as pipe:
        result = pipe.process(messages)
    assert result.messages == messages and not result.report.by_step("pairing")


def test_policy_can_keep_repeated_anthropic_ids(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\npairing:\n  rename_duplicate_ids: false\n")
    messages = build(
        [A(None, calls("t")), res(("t", "a")), A(None, calls("t")), res(("t", "b"))], "anthropic"
    )
    with middleware.Pipeline.from_policy(policy) as pipe:
        result = pipe.process(messages)
    assert result.messages == messages
    assert [v.code for v in middleware.check_history(result.messages)] == ["duplicate_id"]


def test_report_is_json_serialisable_and_ordered(pipe: middleware.Pipeline) -> None:
    messages = [
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "x", "content": [{"type": "text", "text": "t"}]}
        ]},
        {"role": "assistant", "content": [{**TOOL_USE_T1, "id": ""}]},
    ]  # fmt: skip
    result = pipe.process(messages)
    # Ids and claims first (in message order), then what the layout did.
    assert [a.kind for a in result.report.actions] == [
        "orphan_dropped",
        "id_generated",
        "empty_message_removed",
        "synthetic_result",
    ]
    assert '"content": [{"type": "text", "text": "t"}]' in result.report.to_json(indent=None)


def test_the_missing_result_text_is_chatclis_by_default() -> None:
    assert default_of("pairing.missing_result_text") == MISSING


@pytest.mark.parametrize(
    "bad_id", ["call_1|fc_2", "wf:0", "toolu 01", "x" * 65, "ünïcode", "call.1/2"]
)
def test_ids_the_anthropic_api_rejects_are_renamed(bad_id: str) -> None:
    history: list[Msg] = [
        U("go"),
        A(None, calls(bad_id, "ok_id")),
        res((bad_id, "a"), ("ok_id", "b")),
    ]
    messages = build(history, "anthropic")
    with middleware.Pipeline.from_policy(None) as pipeline:
        result = pipeline.process(messages, format="anthropic")
        assert middleware.check_history(messages, "anthropic")[0].code == "invalid_id"
        assert middleware.check_history(result.messages, "anthropic") == []
        use, kept = result.messages[1]["content"]
        answer = result.messages[2]["content"][0]
        assert use["id"] == answer["tool_use_id"] != bad_id and kept["id"] == "ok_id"
        assert len(use["id"]) <= 64
        (renamed,) = result.report.by_step("pairing")
        assert (renamed.kind, renamed.detail["original_id"]) == ("id_renamed", bad_id)
        again = pipeline.process(result.messages, format="anthropic")
        assert again.messages == result.messages and not again.changed
        # The rename depends on the id alone: a longer history renames it the same way.
        longer = [*messages, {"role": "assistant", "content": "done"}]
        assert pipeline.process(longer).messages[1] == result.messages[1]


def test_distinct_bad_ids_stay_distinct_and_other_formats_keep_them() -> None:
    history: list[Msg] = [U("go"), A(None, calls("a:b", "a.b")), res(("a:b", "1"), ("a.b", "2"))]
    with middleware.Pipeline.from_policy(None) as pipeline:
        out = pipeline.process(build(history, "anthropic"), format="anthropic").messages
        first, second = (u["id"] for u in out[1]["content"])
        assert first != second and first.startswith("a_b_") and second.startswith("a_b_")
        messages = build(history, "openai")
        assert pipeline.process(messages, format="openai").messages == messages


REASONING = {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAA"}


def test_responses_reasoning_left_without_its_item_is_removed_and_reported() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "a", "arguments": "{}"}
    history = [
        {"role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        call,
        REASONING,
        dict(call),  # the same call id again in one response: dropped
        {"type": "function_call_output", "call_id": "c1", "output": "x"},
    ]
    with middleware.Pipeline.from_policy(None) as pipeline:
        result = pipeline.process(history, format="responses")
    assert middleware.check_history(result.messages, "responses") == []
    assert [m.get("id") for m in result.messages if m.get("type") == "reasoning"] == ["rs_1"]
    dropped = [a for a in result.report.actions if a.kind == "reasoning_dropped"]
    assert [(a.tool_call_id, a.detail["item"]) for a in dropped] == [("rs_2", REASONING)]


def test_an_interrupted_response_ending_in_reasoning_loses_only_that_item() -> None:
    history = [{"role": "user", "content": "go"}, REASONING]
    assert middleware.check_history(history, "responses")[0].code == "reasoning_without_item"
    with middleware.Pipeline.from_policy(None) as pipeline:
        result = pipeline.process(history, format="responses")
    assert result.messages == history[:1] and result.messages[0] is history[0]
    assert result.report.actions[0].detail["item"] == REASONING


def test_a_reasoning_item_followed_only_by_a_stranded_one_goes_too() -> None:
    # Found by the fuzz tests: dropping the last reasoning item stranded the one before it.
    history = [{"role": "user", "content": "go"}, REASONING, {**REASONING, "id": "rs_3"}]
    with middleware.Pipeline.from_policy(None) as pipeline:
        result = pipeline.process(history, format="responses")
    assert middleware.check_history(result.messages, "responses") == []
    assert [a.tool_call_id for a in result.report.actions if a.kind == "reasoning_dropped"] == [
        "rs_2",
        "rs_3",
    ]
