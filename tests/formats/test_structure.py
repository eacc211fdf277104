"""The structural guard every codec runs at parse time: bounded depth, JSON values only,
typed fields before they are used as keys. Bad input is a HistoryError naming the message
and a JSON path, never a traceback, a hang or a step silently switched off."""

from __future__ import annotations

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


# -- depth -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_deeply_nested_arguments_of_an_idless_call_are_a_history_error(fmt: str) -> None:
    # Used to be a RecursionError while digesting the arguments for a generated id.
    messages = [{"role": "user", "content": "go"}, idless_call(fmt, nested(5_000))]
    error = raises(fmt, messages, 1, f"deeper than {MAX_DEPTH} levels")
    path = "$.content[0].input.a.a" if fmt == "anthropic" else "$."
    assert path in error.reason


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_bound_is_inclusive(fmt: str) -> None:
    # The message itself is level 1; its fields go MAX_DEPTH levels deep at most.
    fits = {"role": "user", "content": "x", "meta": nested(MAX_DEPTH - 2, [])}
    assert get_codec(fmt).parse([fits]).nodes[0].raw is fits
    too_deep = {"role": "user", "content": "x", "meta": nested(MAX_DEPTH - 1, [])}
    raises(fmt, [too_deep], 0, f"deeper than {MAX_DEPTH} levels", "$.meta.a.a")


def test_a_hundred_thousand_levels_fail_fast_without_recursion() -> None:
    messages = [{"role": "user", "content": "x", "meta": nested(100_000)}]
    raises("openai", messages, 0, "deeper than")


def test_a_deeply_nested_orphan_is_refused_before_the_report_is_written() -> None:
    # Used to be reported as dropped, then report.to_json() raised RecursionError.
    orphan = {"type": "tool_result", "tool_use_id": "ghost", "content": [
        {"type": "text", "text": "x", "extra": nested(600)}
    ]}  # fmt: skip
    raises("anthropic", [{"role": "user", "content": [orphan]}], 0, "$.content[0].content[0].extra")


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


def test_a_deep_unrelated_field_no_longer_switches_the_budget_off(tmp_path: Path) -> None:
    # preset:hermes used to send the 600 KB result whole: its budget step hit the
    # recursion limit measuring the deep field and was skipped as a failed plugin.
    messages = _big_session(nested(500))
    with preset("hermes", tmp_path) as pipe, pytest.raises(middleware.HistoryError) as info:
        pipe.process(messages)
    assert info.value.index == 0 and "$.metadata.a" in info.value.reason
    with preset("hermes", tmp_path) as pipe:  # the same session, shallow: spilled as usual
        result = pipe.process(_big_session(nested(3)))
    assert not result.report.problems
    assert any(a.kind == "spilled" for a in result.report.by_step("budget"))


def test_a_deep_unrelated_field_no_longer_switches_microcompaction_off() -> None:
    messages = _big_session(nested(500))
    with middleware.Pipeline.from_policy(None) as pipe, pytest.raises(middleware.HistoryError):
        pipe.process(messages)


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
    value = {key: nested(MAX_DEPTH + 10)}
    messages = [{"role": "user", "content": "x", "meta": value}]
    error = raises("openai", messages, 0, "deeper than")
    assert len(str(error)) < 400, str(error)
