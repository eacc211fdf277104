"""process() takes what the official SDKs produce and whole request bodies, and gives them
back in the shape given, without touching the caller's objects (issue 15, item 1)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import middleware

anthropic_types = pytest.importorskip("anthropic.types")
openai_chat = pytest.importorskip("openai.types.chat")


def chat_call() -> Any:
    """The assistant message of a Chat Completions answer, as the SDK parses it."""
    return openai_chat.ChatCompletionMessage.model_validate({
        "role": "assistant", "content": None, "refusal": None,
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "grep", "arguments": '{"q": "x"}'}}],
    })  # fmt: skip


def test_an_sdk_message_appended_to_the_history_is_read_as_the_sdk_sends_it() -> None:
    message = chat_call()
    history = [
        {"role": "user", "content": "find x"},
        message,
        {"role": "tool", "tool_call_id": "call_1", "content": "y" * 30_000},
    ]
    before = message.model_dump()
    with middleware.Pipeline.from_policy(None) as pipe:
        result = pipe.process(history)
    assert [a.kind for a in result.report.actions] == ["spilled"]
    assert result.messages[1] is message  # untouched: the caller's own object
    assert result.messages[0] is history[0]
    assert "full output saved to" in result.messages[2]["content"]
    assert message.model_dump() == before
    assert result.output is result.messages


def test_sdk_content_blocks_inside_messages() -> None:
    text = anthropic_types.TextBlock(type="text", text="Let me look.", citations=None)
    use = anthropic_types.ToolUseBlock(type="tool_use", id="toolu_1", name="Bash", input={})
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [text, use]},
        {"role": "user", "content": "what happened?"},
    ]
    snapshot = copy.deepcopy(history)
    with middleware.Pipeline.from_policy(None) as pipe:
        result = pipe.process(history)
    assert result.report.format == "anthropic"
    assert [a.kind for a in result.report.actions] == ["synthetic_result"]
    assert result.messages[1] is history[1]
    assert result.messages[2]["content"][0]["tool_use_id"] == "toolu_1"
    assert history == snapshot
    assert middleware.check_history(
        [result.messages[0], {"role": "assistant", "content": [{"type": "text", "text": "x"},
         {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]},
         *result.messages[2:]], "anthropic") == []  # fmt: skip


BODIES: list[tuple[str, dict[str, Any]]] = [
    ("anthropic", {"model": "m", "max_tokens": 9, "system": "s", "metadata": {"user_id": "u"},
                   "messages": [{"role": "user", "content": "a"}, {"role": "assistant",
                   "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]}]}),
    ("openai", {"model": "m", "tools": [{"type": "function", "function": {"name": "ls"}}],
                "messages": [{"role": "user", "content": "a"}, {"role": "assistant",
                "content": None, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "ls", "arguments": "{}"}}]}]}),
    ("responses", {"model": "m", "instructions": "i", "store": False, "input": [
        {"type": "message", "role": "user", "content": "a"},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"}]}),
]  # fmt: skip


@pytest.mark.parametrize(("fmt", "body"), BODIES, ids=[f for f, _ in BODIES])
def test_a_whole_body_comes_back_as_a_body(fmt: str, body: dict[str, Any]) -> None:
    snapshot = copy.deepcopy(body)
    with middleware.Pipeline.from_policy(None) as pipe:
        result = pipe.process(body)
    assert result.report.format == fmt
    key = "input" if fmt == "responses" else "messages"
    assert {k: v for k, v in result.output.items() if k != key} == {
        k: v for k, v in body.items() if k != key
    }
    assert result.output[key] == result.messages and len(result.messages) == 3
    assert middleware.check_history(result.output[key], fmt) == []
    assert body == snapshot


def test_a_plain_text_input_and_a_stored_continuation() -> None:
    with middleware.Pipeline.from_policy(None) as pipe:
        text = {"model": "m", "input": "hello"}
        result = pipe.process(text)
        assert result.output is text and not result.changed
        stored = {
            "model": "m",
            "previous_response_id": "resp_1",
            "input": [{"type": "function_call_output", "call_id": "c9", "output": "done"}],
        }
        assert pipe.process(stored).output == stored  # outputs of stored calls are kept


def test_a_mapping_that_is_no_body_is_a_clear_error() -> None:
    with (
        middleware.Pipeline.from_policy(None) as pipe,
        pytest.raises(
            middleware.HistoryError, match="or a request body with a 'messages', 'contents' or"
        ),
    ):
        pipe.process({"prompt": "legacy"})
