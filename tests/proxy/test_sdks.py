"""The official SDKs, pointed at the proxy by their base URL and nothing else: histories the
provider refuses (a call left unanswered, a tool output over the context window) go through
and succeed, sync and async, streamed and not, on every route; sent directly they get the
provider's 400."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import openai
import pytest
from proxy_stack import Stack

HUGE = "log line with some detail\n" * 6_000  # 156,000 chars: over the stand-in's window


def anthropic_history(kind: str) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "make"}}
    if kind == "unanswered":
        return [
            {"role": "user", "content": "Build it."},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": "Did it work?"},
        ]
    return [
        {"role": "user", "content": "Build it."},
        {"role": "assistant", "content": [use]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": HUGE}],
        },
    ]


def chat_history(kind: str) -> list[dict[str, Any]]:
    call = {"id": "call_01", "type": "function", "function": {"name": "make", "arguments": "{}"}}
    head = [
        {"role": "user", "content": "Build it."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    if kind == "unanswered":
        return [*head, {"role": "user", "content": "Did it work?"}]
    return [*head, {"role": "tool", "tool_call_id": "call_01", "content": HUGE}]


def responses_input(kind: str) -> list[dict[str, Any]]:
    head = [
        {"type": "message", "role": "user", "content": "Build it."},
        {"type": "function_call", "call_id": "call_01", "name": "make", "arguments": "{}"},
    ]
    if kind == "unanswered":
        return [*head, {"type": "message", "role": "user", "content": "Did it work?"}]
    return [*head, {"type": "function_call_output", "call_id": "call_01", "output": HUGE}]


KINDS = ["unanswered", "oversized"]


@contextmanager
def clients(stack: Stack, sdk: Any, base: str) -> Iterator[tuple[Any, Any, Callable[[], Any]]]:
    """A client through the proxy, one sent directly, and a maker of async clients through
    the proxy (made inside the event loop that uses them); all closed afterwards."""
    sync_cls, async_cls = (
        (sdk.Anthropic, sdk.AsyncAnthropic) if sdk is anthropic else (sdk.OpenAI, sdk.AsyncOpenAI)
    )
    kw = {"api_key": "sk-test", "max_retries": 0}
    with (
        sync_cls(base_url=stack.url + base, **kw) as through,
        sync_cls(base_url=stack.upstream + base, **kw) as direct,
    ):
        yield through, direct, lambda: async_cls(base_url=stack.url + base, **kw)


@pytest.mark.parametrize("kind", KINDS)
def test_anthropic_messages(stack: Stack, kind: str) -> None:
    with clients(stack, anthropic, "") as (sync, direct, make_async):
        run_anthropic(stack, kind, sync, direct, make_async)


def run_anthropic(stack: Stack, kind: str, sync: Any, direct: Any, make_async: Any) -> None:
    args = {"model": "claude-test", "max_tokens": 100, "messages": anthropic_history(kind)}
    with pytest.raises(anthropic.BadRequestError):
        direct.messages.create(**args)
    assert sync.messages.create(**args).content[0].text == "ok"
    with sync.messages.stream(**args) as stream:
        assert "".join(stream.text_stream) == "ok"
    events = list(sync.messages.create(**args, stream=True))
    assert events[0].type == "message_start" and events[-1].type == "message_stop"
    assert sync.messages.count_tokens(model="claude-test", messages=args["messages"]).input_tokens

    async def use_async() -> str:
        async with make_async() as aio:
            message = await aio.messages.create(**args)
            async with aio.messages.stream(**args) as stream:
                streamed = "".join([text async for text in stream.text_stream])
        return str(message.content[0].text + streamed)

    assert asyncio.run(use_async()) == "okok"
    sent = [body for path, _, body in stack.provider.accepted if path == "/v1/messages"]
    assert sent and all(len(str(body["messages"])) < 60_000 for body in sent)


@pytest.mark.parametrize("kind", KINDS)
def test_anthropic_beta_namespace(stack: Stack, kind: str) -> None:
    with clients(stack, anthropic, "") as (sync, _, _):
        message = sync.beta.messages.create(
            model="claude-test",
            max_tokens=100,
            messages=anthropic_history(kind),
            betas=["context-management-2025-06-27"],
        )
    assert message.content[0].text == "ok"
    assert "context-management-2025-06-27" in stack.provider.accepted[-1][1]["anthropic-beta"]


@pytest.mark.parametrize("kind", KINDS)
def test_openai_chat_completions(stack: Stack, kind: str) -> None:
    with clients(stack, openai, "/v1") as (sync, direct, make_async):
        run_chat(kind, sync, direct, make_async)


def run_chat(kind: str, sync: Any, direct: Any, make_async: Any) -> None:
    args = {"model": "gpt-test", "messages": chat_history(kind)}
    with pytest.raises(openai.BadRequestError):
        direct.chat.completions.create(**args)
    assert sync.chat.completions.create(**args).choices[0].message.content == "ok"
    chunks = list(sync.chat.completions.create(**args, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "ok"
    with sync.chat.completions.stream(**args) as stream:
        assert stream.get_final_completion().choices[0].message.content == "ok"

    async def use_async() -> str:
        async with make_async() as aio:
            completion = await aio.chat.completions.create(**args)
            stream = await aio.chat.completions.create(**args, stream=True)
            streamed = "".join(
                [c.choices[0].delta.content or "" async for c in stream if c.choices]
            )
        return (completion.choices[0].message.content or "") + streamed

    assert asyncio.run(use_async()) == "okok"


@pytest.mark.parametrize("kind", KINDS)
def test_openai_responses(stack: Stack, kind: str) -> None:
    with clients(stack, openai, "/v1") as (sync, direct, make_async):
        run_responses(stack, kind, sync, direct, make_async)


def run_responses(stack: Stack, kind: str, sync: Any, direct: Any, make_async: Any) -> None:
    args = {"model": "gpt-test", "input": responses_input(kind)}
    with pytest.raises(openai.BadRequestError):
        direct.responses.create(**args)
    assert sync.responses.create(**args).output_text == "ok"
    events = list(sync.responses.create(**args, stream=True))
    assert events[-1].type == "response.completed"
    with sync.responses.stream(**args) as stream:
        assert stream.get_final_response().output_text == "ok"

    async def use_async() -> str:
        async with make_async() as aio:
            response = await aio.responses.create(**args)
        return str(response.output_text)

    assert asyncio.run(use_async()) == "ok"
    assert not [r for r in stack.provider.refused if r[0] == "/v1/responses" and r[2] != args]


def test_a_plain_string_input_goes_through(stack: Stack) -> None:
    with clients(stack, openai, "/v1") as (sync, _, _):
        assert sync.responses.create(model="gpt-test", input="hello").output_text == "ok"
    assert stack.provider.accepted[-1][2]["input"] == "hello"
