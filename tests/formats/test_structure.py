"""The structural guard every codec runs at parse time: bounded depth, JSON values only,
typed fields before they are used as keys. Bad input is a HistoryError naming the message
and a JSON path, never a traceback, a hang or a step silently switched off."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware.formats import get_codec
from middleware.formats.structure import MAX_DEPTH
from tests.preset_builders import preset

FORMATS = ["anthropic", "openai", "responses"]


def nested(levels: int, leaf: Any = "x") -> Any:
    """``levels`` nested objects ``{"a": {"a": ...}}`` around ``leaf`` (built without
    recursion, so any depth is cheap)."""
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def idless_call(fmt: str, arguments: Any) -> dict[str, Any]:
    """An assistant message (Responses: a call item) whose one call has no id."""
    if fmt == "anthropic":
        use = {"type": "tool_use", "id": "", "name": "bash", "input": arguments}
        return {"role": "assistant", "content": [use]}
    if fmt == "openai":
        call = {"id": "", "type": "function", "function": {"name": "bash", "arguments": arguments}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"type": "function_call", "call_id": "", "name": "bash", "arguments": arguments}


def snapshot(value: Any) -> list[Any]:
    """A flat reading of ``value`` taken without recursion (deepcopy and == recurse), to
    check the input is not mutated whatever its depth."""
    out: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            out.append(("{", id(item), len(item)))
            for key, member in item.items():
                out.append(("key", key))
                stack.append(member)
        elif isinstance(item, list):
            out.append(("[", id(item), len(item)))
            stack.extend(item)
        else:
            out.append(("value", id(item), repr(item)))
    return out


def raises(fmt: str, messages: Any, index: int, *fragments: str) -> middleware.HistoryError:
    """process() and check_history() raise the same HistoryError naming ``index``; the
    input is untouched."""
    before = snapshot(messages)
    with middleware.Pipeline.from_policy(None) as pipe, pytest.raises(middleware.HistoryError) as e:
        pipe.process(messages, format=fmt)
    assert e.value.index == index, str(e.value)
    for fragment in fragments:
        assert fragment in str(e.value), str(e.value)
    with pytest.raises(middleware.HistoryError) as checked:
        middleware.check_history(messages, fmt)
    assert str(checked.value) == str(e.value)
    assert snapshot(messages) == before
    return e.value


# -- typed fields --------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", [*FORMATS, "auto"])
@pytest.mark.parametrize("role", [["user"], {"r": 1}, 3])
def test_a_role_that_is_not_a_string_is_a_history_error(fmt: str, role: Any) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": role, "content": "x"}]
    raises(fmt, messages, 1, "'role'")


def test_a_responses_type_that_is_not_a_string_is_a_history_error() -> None:
    raises("responses", [{"type": ["message"], "role": "user", "content": "x"}], 0, "'type'")


def test_an_openai_tool_call_type_that_is_not_a_string_is_a_history_error() -> None:
    call = {"id": "c", "type": ["function"], "function": {"name": "x", "arguments": "{}"}}
    raises("openai", [{"role": "assistant", "content": None, "tool_calls": [call]}], 0, "type")


def test_detection_survives_unhashable_fields() -> None:
    part = {"type": ["tool_use"], "id": "x"}
    messages = [{"role": "user", "content": [part]}, {"role": ["tool"], "content": "x"}]
    assert middleware.detect_format(messages).format == "openai"


# -- depth: it costs only the block that has it ---------------------------------------------


def shape(value: Any) -> list[Any]:
    """The structure and values of ``value`` without object identities, read without
    recursion: equal for equal JSON however deep."""
    return [item if item[0] == "key" else item[::2] for item in snapshot(value)]


def deep_result(fmt: str, call_id: str, text: str, deep: Any) -> dict[str, Any]:
    """A result message whose one text part carries ``deep`` beside its text."""
    if fmt == "anthropic":
        part = {"type": "text", "text": text, "extra": deep}
        block = {"type": "tool_result", "tool_use_id": call_id, "content": [part]}
        return {"role": "user", "content": [block]}
    if fmt == "openai":
        part = {"type": "text", "text": text, "extra": deep}
        return {"role": "tool", "tool_call_id": call_id, "content": [part]}
    part = {"type": "input_text", "text": text, "extra": deep}
    return {"type": "function_call_output", "call_id": call_id, "output": [part]}


def calls(fmt: str, *ids: str) -> list[dict[str, Any]]:
    if fmt == "anthropic":
        uses = [{"type": "tool_use", "id": i, "name": "bash", "input": {"n": i}} for i in ids]
        return [{"role": "assistant", "content": uses}]
    if fmt == "openai":
        made = [
            {"id": i, "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            for i in ids
        ]
        return [{"role": "assistant", "content": None, "tool_calls": made}]
    return [{"type": "function_call", "call_id": i, "name": "bash", "arguments": "{}"} for i in ids]


def results_of(fmt: str, out: list[Any]) -> list[Any]:
    """The result blocks (Anthropic) or messages (OpenAI, Responses) of ``out``."""
    if fmt == "anthropic":
        return [
            block
            for message in out
            if isinstance(message.get("content"), list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        ]
    return [m for m in out if m.get("role") == "tool" or m.get("type") == "function_call_output"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_deeply_nested_call_is_sealed_and_still_paired(fmt: str) -> None:
    # It used to make the whole request a HistoryError: nothing cleaned, nothing repaired.
    deep = nested(5_000)
    messages = [{"role": "user", "content": "go"}, idless_call(fmt, deep)]
    before = snapshot(messages)
    with middleware.Pipeline.from_policy(None) as pipe:
        result = pipe.process(messages, format=fmt)
        again = pipe.process(result.messages, format=fmt)
    assert snapshot(messages) == before
    call = result.messages[1]
    if fmt == "anthropic":
        block = call["content"][0]
        assert block["input"] is deep and block["id"]  # sent as it came, with an id
    elif fmt == "openai":
        entry = call["tool_calls"][0]
        assert entry["function"]["arguments"] is deep and entry["id"]
    else:
        assert call["arguments"] is deep and call["call_id"]
    (answer,) = results_of(fmt, result.messages)  # the missing result, made
    assert "missing" in json.dumps(answer).lower()
    (sealed,) = result.report.sealed
    assert (sealed.message_index, sealed.kind) == (1, "tool_call")
    kinds = [a.kind for a in result.report.by_step("pairing")]
    assert "synthetic_result" in kinds, kinds
    assert not again.report.actions and shape(again.messages) == shape(result.messages)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_deeply_nested_result_is_sent_whole_and_its_neighbour_is_cut(fmt: str) -> None:
    # The case: one deep field made a 600 KB neighbour go out whole.
    deep = nested(300)
    big = "row\n" * 150_000
    messages: list[Any] = [{"role": "user", "content": "go"}, *calls(fmt, "c1", "c2")]
    if fmt == "anthropic":
        sealed = deep_result(fmt, "c1", big, deep)
        plain = {"type": "tool_result", "tool_use_id": "c2", "content": big}
        messages.append({"role": "user", "content": [*sealed["content"], plain]})
    else:
        messages.append(deep_result(fmt, "c1", big, deep))
        messages.append(deep_result(fmt, "c2", big, "shallow"))
    messages.append({"role": "user", "content": "and now?"} if fmt != "responses" else
                    {"type": "message", "role": "user", "content": "and now?"})  # fmt: skip
    with middleware.Pipeline.from_policy(None) as pipe:
        result = pipe.process(messages, format=fmt)
        again = pipe.process(result.messages, format=fmt)
    first, second = results_of(fmt, result.messages)
    original = results_of(fmt, messages)[0]
    assert shape(first) == shape(original)  # the sealed result, exactly as it came
    assert len(json.dumps(second)) < 20_000  # its neighbour went to the spill store
    assert [(s.kind, s.tool_call_id) for s in result.report.sealed] == [("tool_result", "c1")]
    spilled = [a for a in result.report.actions if a.kind == "spilled"]
    assert [a.tool_call_id for a in spilled] == ["c2"]
    assert not again.report.actions and json.dumps(again.messages) == json.dumps(result.messages)


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_bound_is_inclusive(fmt: str) -> None:
    # The message itself is level 1; its fields go MAX_DEPTH levels deep at most.
    fits = {"role": "user", "content": "x", "meta": nested(MAX_DEPTH - 2, [])}
    assert get_codec(fmt).parse([fits]).nodes[0].raw is fits
    too_deep = {"role": "user", "content": "x", "meta": nested(MAX_DEPTH - 1, [])}
    node = get_codec(fmt).parse([too_deep]).nodes[0]
    assert node.raw is too_deep  # a field outside every block: written as it came
    with middleware.Pipeline.from_policy(None) as pipe:
        assert pipe.process([too_deep], format=fmt).messages[0] is too_deep
    middleware.check_history([too_deep], fmt)  # not an error either


def test_a_hundred_thousand_levels_pass_through_without_recursion() -> None:
    messages = [{"role": "user", "content": "x", "meta": nested(100_000)}]
    with middleware.Pipeline.from_policy(None) as pipe:
        assert pipe.process(messages, format="openai").messages[0] is messages[0]


def test_a_deeply_nested_orphan_is_dropped_and_reported_readably() -> None:
    # Used to be reported as dropped, then report.to_json() raised RecursionError.
    orphan = {"type": "tool_result", "tool_use_id": "ghost", "content": [
        {"type": "text", "text": "the orphan's text", "extra": nested(600)}
    ]}  # fmt: skip
    with middleware.Pipeline.from_policy(None) as pipe:
        result = pipe.process([{"role": "user", "content": [orphan]}], format="anthropic")
    (dropped,) = [a for a in result.report.actions if a.tool_call_id == "ghost"]
    assert dropped.step == "pairing" and "ghost" not in json.dumps(result.messages)
    text = result.report.to_json()
    assert "the orphan's text" in text and f"deeper than {MAX_DEPTH} levels" in text


def _big_session(deep_field: Any) -> list[dict[str, Any]]:
    """A user message carrying an unrelated deep field, then one 600 KB bash result."""
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "row\n" * 150_000}
    return [
        {"role": "user", "content": "go", "metadata": deep_field},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "bash", "input": {}}
        ]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": "done"},
    ]  # fmt: skip


@pytest.mark.parametrize("depth", [3, 500, 50_000])
def test_a_deep_unrelated_field_switches_no_step_off(tmp_path: Path, depth: int) -> None:
    # preset:hermes once sent the 600 KB result whole (its budget step hit the recursion
    # limit measuring the deep field); then the whole request was refused.
    messages = _big_session(nested(depth))
    with preset("hermes", tmp_path) as pipe:
        result = pipe.process(messages)
    assert not result.report.problems
    assert any(a.kind == "spilled" for a in result.report.by_step("budget"))
    assert result.messages[0] is messages[0]


# -- JSON values -----------------------------------------------------------------------------


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ({1: "a"}, "key 1"),
        ({("a",): 1}, "key ('a',)"),
        ({"ok": {None: 1}}, "$.content[0].input.ok"),
        ({"s": {1, 2}}, "a set"),
        ({"b": b"bytes"}, "a bytes"),
        ({"o": Opaque()}, "a Opaque"),
        ({"t": ("a", "b")}, "a tuple"),
        ({"n": math.nan}, "NaN"),
        ({"n": math.inf}, "inf"),
        ({"n": -math.inf}, "-inf"),
        ({"u": "caf\udce9"}, "unpaired surrogate"),
    ],
)
def test_values_that_are_not_json_are_a_history_error(value: Any, fragment: str) -> None:
    use = {"type": "tool_use", "id": "", "name": "bash", "input": value}
    error = raises("anthropic", [{"role": "assistant", "content": [use]}], 0, fragment)
    assert error.reason.startswith("$.content[0].input")


def test_non_string_keys_with_mixed_types_no_longer_raise_type_error() -> None:
    # json.dumps(sort_keys=True) raised TypeError comparing int and str keys.
    use = {"type": "tool_use", "id": "", "name": "bash", "input": {1: "a", "b": 2}}
    raises("anthropic", [{"role": "assistant", "content": [use]}], 0, "key 1 (int)")


def test_json_values_of_every_kind_are_accepted() -> None:
    value = {"s": "é ✓ 🙂", "i": -3, "big": 10**30, "f": 1.5, "t": True, "n": None, "l": [[], {}]}
    messages = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": value}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
        },
    ]
    with middleware.Pipeline.from_policy(None) as pipe:  # fmt: skip
        result = pipe.process(messages)
    assert result.messages[0] is messages[0] and not result.changed


def test_long_paths_and_keys_are_shortened_in_the_message() -> None:
    key = "k" * 500
    value = {key: nested(MAX_DEPTH - 10, math.nan)}
    messages = [{"role": "user", "content": "x", "meta": value}]
    error = raises("openai", messages, 0, "NaN", "more)")
    assert len(str(error)) < 400, str(error)
