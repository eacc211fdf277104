"""Malformed histories raise HistoryError naming the message; merely odd ids do not."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import middleware
from middleware.formats import get_codec

USER = {"role": "user", "content": "hi"}


def _call(fmt: str, **overrides: Any) -> dict[str, Any]:
    """An assistant message or item holding one well-formed call."""
    if fmt == "anthropic":
        block = {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}, **overrides}
        return {"role": "assistant", "content": [block]}
    if fmt == "openai":
        entry = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "bash", "arguments": "{}"},
            **overrides,
        }
        return {"role": "assistant", "content": None, "tool_calls": [entry]}
    return {"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": "{}"}


def _expect(fmt: str, messages: Any, index: int | None, fragment: str = "") -> None:
    before = copy.deepcopy(messages)
    with pytest.raises(middleware.HistoryError) as info:
        get_codec(fmt).parse(messages)
    error = info.value
    assert error.index == index
    prefix = "history:" if index is None else f"message {index}:"
    assert str(error).startswith(prefix), str(error)
    assert fragment in str(error)
    assert messages == before
    # The pipeline raises the same error (with the format given, detection cannot interfere).
    with middleware.Pipeline.from_policy(None) as pipe, pytest.raises(middleware.HistoryError) as p:
        pipe.process(messages, format=fmt)
    assert p.value.index == index
    if isinstance(messages, dict):  # process() also takes request bodies, and says so
        assert "or a request body with a 'messages', " in str(p.value)
    else:
        assert str(p.value) == str(error)


FORMATS = ["anthropic", "openai", "responses"]


# -- the history as a whole -------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("history", [{"role": "user", "content": "hi"}, "hello", None, b"x", 7])
def test_history_not_a_list(fmt: str, history: Any) -> None:
    _expect(fmt, history, None, "expected a list of messages")


@pytest.mark.parametrize("history", [{"role": "user", "content": "hi"}, "hello", None])
def test_history_not_a_list_auto(history: Any) -> None:
    with (
        middleware.Pipeline.from_policy(None) as pipe,
        pytest.raises(middleware.HistoryError) as info,
    ):
        pipe.process(history)
    assert info.value.index is None
    assert str(info.value).startswith("history:")


def test_tuple_history_is_accepted() -> None:
    history = (USER, {"role": "assistant", "content": "hello"})
    out = get_codec("openai").render(get_codec("openai").parse(history))
    assert out == list(history)


# -- one message -------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("bad", ["text", 3, None, ["role", "user"]])
def test_message_not_an_object(fmt: str, bad: Any) -> None:
    _expect(fmt, [USER, bad], 1, "expected a JSON object")


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_no_role(fmt: str) -> None:
    _expect(fmt, [USER, USER, {"content": "hi"}], 2, "no 'role'")


def test_responses_item_without_type_or_role() -> None:
    _expect("responses", [USER, {"content": "hi", "id": "x"}], 1, "neither a 'type' nor a 'role'")


def test_responses_item_with_non_string_type() -> None:
    _expect("responses", [{"type": 5, "content": "hi"}], 0, "item 'type' must be a string")


@pytest.mark.parametrize(
    ("fmt", "role"),
    [
        ("anthropic", "tool"),
        ("anthropic", "developer"),
        ("anthropic", "model"),
        ("openai", "model"),
        ("openai", "bot"),
        ("responses", "tool"),
        ("responses", "model"),
    ],
)
def test_unknown_role(fmt: str, role: Any) -> None:
    _expect(fmt, [USER, {"role": role, "content": "x"}], 1, "unknown role")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("role", [3, ["user"], {"role": "user"}])
def test_role_of_wrong_type(fmt: str, role: Any) -> None:
    _expect(fmt, [USER, {"role": role, "content": "x"}], 1, "'role' must be a string")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("content", [42, {"type": "text", "text": "hi"}, 1.5, True])
def test_content_of_wrong_type(fmt: str, content: Any) -> None:
    _expect(fmt, [USER, {"role": "user", "content": content}], 1, "content must be a string")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("part", ["hello", 1, None, ["text"]])
def test_content_part_not_an_object(fmt: str, part: Any) -> None:
    content = [{"type": "text", "text": "ok"}, part]
    _expect(fmt, [{"role": "user", "content": content}], 0, "content part 1 must be a JSON object")


def test_anthropic_block_without_type() -> None:
    _expect("anthropic", [{"role": "user", "content": [{"text": "hi"}]}], 0, "has no 'type'")


def test_anthropic_missing_content() -> None:
    _expect("anthropic", [USER, {"role": "assistant"}], 1, "no 'content'")


def test_responses_message_without_content() -> None:
    _expect("responses", [{"type": "message", "role": "user"}], 0, "no 'content'")


# -- tool calls --------------------------------------------------------------------------


@pytest.mark.parametrize("name", [5, ["bash"], {"n": 1}])
def test_anthropic_tool_use_name_of_wrong_type(name: Any) -> None:
    # A missing, empty or blank name is repaired (the call is dropped), not an error.
    _expect("anthropic", [USER, _call("anthropic", name=name)], 1, "'name' must be a string")


def test_anthropic_tool_use_in_user_message() -> None:
    block = {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}
    _expect("anthropic", [{"role": "user", "content": [block]}], 0, "assistant message")


def test_openai_tool_calls_not_a_list() -> None:
    message = _call("openai")
    message["tool_calls"] = message["tool_calls"][0]
    _expect("openai", [USER, message], 1, "'tool_calls' must be a list")


def test_openai_tool_calls_entry_not_an_object() -> None:
    message = {"role": "assistant", "content": None, "tool_calls": ["call_1"]}
    _expect("openai", [USER, message], 1, "tool_calls[0]")


def test_openai_tool_call_without_function() -> None:
    message = _call("openai")
    del message["tool_calls"][0]["function"]
    _expect("openai", [USER, message], 1, "tool_calls[0]")


@pytest.mark.parametrize("name", [5, ["bash"]])
def test_openai_tool_call_name_of_wrong_type(name: Any) -> None:
    message = _call("openai", function={"arguments": "{}", "name": name})
    _expect("openai", [USER, message], 1, "name must be a string")


def test_responses_function_call_name_of_wrong_type() -> None:
    item = {**_call("responses"), "name": 5}
    _expect("responses", [USER, item], 1, "'name' must be a string")


@pytest.mark.parametrize("fmt", FORMATS)
def test_missing_or_blank_names_do_not_raise(fmt: str) -> None:
    for name in (None, "", "  "):
        message = _call(fmt)
        target = message if fmt == "responses" else (
            message["content"][0] if fmt == "anthropic" else message["tool_calls"][0]["function"]
        )  # fmt: skip
        if name is None:
            del target["name"]
        else:
            target["name"] = name
        (node,) = get_codec(fmt).parse([message]).nodes
        assert node.calls[0].name == (name or "")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("bad_id", [7, 1.5, ["id"], {"id": "x"}, True])
def test_non_string_call_id(fmt: str, bad_id: Any) -> None:
    message = {**_call(fmt), "call_id": bad_id} if fmt == "responses" else _call(fmt, id=bad_id)
    _expect(fmt, [USER, message], 1, "must be a string")


@pytest.mark.parametrize("bad_id", [7, 0, 2.0, ["x"]])
def test_non_string_result_id(bad_id: Any) -> None:
    anthropic = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": bad_id}]}
    _expect("anthropic", [_call("anthropic"), anthropic], 1, "must be a string")
    openai = {"role": "tool", "tool_call_id": bad_id, "content": "ok"}
    _expect("openai", [_call("openai"), openai], 1, "must be a string")
    responses = {"type": "function_call_output", "call_id": bad_id, "output": "ok"}
    _expect("responses", [_call("responses"), responses], 1, "must be a string")


# -- tool results ------------------------------------------------------------------------


def test_anthropic_tool_result_in_assistant_message() -> None:
    block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
    messages = [_call("anthropic"), {"role": "assistant", "content": [block]}]
    _expect("anthropic", messages, 1, "must be in a user message")


@pytest.mark.parametrize("flag", ["true", 1, 0, None, "yes"])
def test_anthropic_is_error_not_bool(flag: Any) -> None:
    block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok", "is_error": flag}
    _expect("anthropic", [_call("anthropic"), {"role": "user", "content": [block]}], 1, "is_error")


@pytest.mark.parametrize("content", [5, {"text": "x"}])
def test_result_content_of_wrong_type(content: Any) -> None:
    block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": content}
    _expect("anthropic", [_call("anthropic"), {"role": "user", "content": [block]}], 1, "content")
    tool = {"role": "tool", "tool_call_id": "call_1", "content": content}
    _expect("openai", [_call("openai"), tool], 1, "content")
    output = {"type": "function_call_output", "call_id": "call_1", "output": content}
    _expect("responses", [_call("responses"), output], 1, "output")


def test_result_content_part_not_an_object() -> None:
    block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": ["plain"]}
    _expect("anthropic", [_call("anthropic"), {"role": "user", "content": [block]}], 1, "part 0")
    output = {"type": "function_call_output", "call_id": "call_1", "output": [3]}
    _expect("responses", [_call("responses"), output], 1, "part 0")


# -- what must not raise -----------------------------------------------------------------


def _anthropic_pair(call_id: Any, result_id: Any) -> list[dict[str, Any]]:
    call: dict[str, Any] = {"type": "tool_use", "name": "bash", "input": {}}
    result: dict[str, Any] = {"type": "tool_result", "content": "ok"}
    if call_id is not None:
        call["id"] = call_id
    if result_id is not None:
        result["tool_use_id"] = result_id
    return [USER, {"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]


def _openai_pair(call_id: Any, result_id: Any) -> list[dict[str, Any]]:
    call: dict[str, Any] = {"type": "function", "function": {"name": "bash", "arguments": "{}"}}
    result: dict[str, Any] = {"role": "tool", "content": "ok"}
    if call_id is not None:
        call["id"] = call_id
    if result_id is not None:
        result["tool_call_id"] = result_id
    return [USER, {"role": "assistant", "content": None, "tool_calls": [call]}, result]


def _responses_pair(call_id: Any, result_id: Any) -> list[dict[str, Any]]:
    call: dict[str, Any] = {"type": "function_call", "name": "bash", "arguments": "{}"}
    result: dict[str, Any] = {"type": "function_call_output", "output": "ok"}
    if call_id is not None:
        call["call_id"] = call_id
    if result_id is not None:
        result["call_id"] = result_id
    return [USER, call, result]


PAIRS = {"anthropic": _anthropic_pair, "openai": _openai_pair, "responses": _responses_pair}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("call_id", "result_id"), [(None, None), ("", ""), (None, "x"), ("", None)]
)
def test_missing_or_empty_ids_do_not_raise(fmt: str, call_id: Any, result_id: Any) -> None:
    messages = PAIRS[fmt](call_id, result_id)
    before = copy.deepcopy(messages)
    codec = get_codec(fmt)
    conversation = codec.parse(messages)
    assert codec.render(conversation) == messages
    with middleware.Pipeline.from_policy(None) as pipe:
        pipe.process(messages, format=fmt)
    assert messages == before


@pytest.mark.parametrize("fmt", FORMATS)
def test_duplicate_ids_do_not_raise(fmt: str) -> None:
    messages = PAIRS[fmt]("dup", "dup") + PAIRS[fmt]("dup", "dup")[1:]
    before = copy.deepcopy(messages)
    codec = get_codec(fmt)
    conversation = codec.parse(messages)
    assert [c.id for n in conversation.nodes for c in n.calls] == ["dup", "dup"]
    with middleware.Pipeline.from_policy(None) as pipe:
        result = pipe.process(messages, format=fmt)
    assert isinstance(result.messages, list)
    assert messages == before


def test_openai_function_role_is_accepted() -> None:
    messages = [USER, {"role": "function", "name": "legacy", "content": "42"}]
    assert get_codec("openai").render(get_codec("openai").parse(messages)) == messages


def test_error_reason_and_message() -> None:
    with pytest.raises(middleware.HistoryError) as info:
        get_codec("openai").parse([USER, USER, USER, {"role": "robot", "content": "x"}])
    assert info.value.index == 3
    assert str(info.value) == f"message 3: {info.value.reason}"
    assert "robot" in info.value.reason
    assert isinstance(info.value, ValueError)
