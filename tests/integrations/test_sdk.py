"""middleware.wrap(client): every model request of the official SDK clients has its
history cleaned, whatever method sent it; the client is otherwise the same (issue 15, item 2)."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import openai
import pytest
from stand_in import Provider

import middleware
from middleware.integrations.sdk import cleaner_of

UNANSWERED = [
    {"role": "user", "content": "Build it."},
    {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {"cmd": "make"}}]},
    {"role": "user", "content": "Did it work?"},
]  # fmt: skip
HUGE_CHAT = [
    {"role": "user", "content": "Build it."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "make", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "compiler output\n" * 10_000},
]  # fmt: skip
KW: dict[str, Any] = {"api_key": "sk-test", "max_retries": 0}


def test_anthropic_every_method_is_cleaned(provider: tuple[Provider, str]) -> None:
    stand_in, url = provider
    with anthropic.Anthropic(base_url=url, **KW) as plain:
        with pytest.raises(anthropic.BadRequestError):
            plain.messages.create(model="m", max_tokens=9, messages=UNANSWERED)
        client = middleware.wrap(plain)
        args: dict[str, Any] = {"model": "m", "max_tokens": 9, "messages": UNANSWERED}
        assert client.messages.create(**args).content[0].text == "ok"
        with client.messages.stream(**args) as stream:
            assert stream.get_final_text() == "ok"
        assert client.messages.count_tokens(model="m", messages=UNANSWERED).input_tokens > 0
        assert client.beta.messages.create(**args, betas=["context-management-2025-06-27"])
        assert client.with_options(timeout=30).messages.create(**args).content[0].text == "ok"
        raw = client.messages.with_raw_response.create(**args)
        assert raw.http_response.status_code == 200
        assert client.models.list()  # not a model request: untouched
        report = cleaner_of(client).last
        assert report is not None and report.report is not None
        assert [a.kind for a in report.report.actions] == ["synthetic_result"]
    bodies = [b for p, _, b in stand_in.accepted if p.startswith("/v1/messages")]
    assert len(bodies) == 6
    for body in bodies:
        assert body["messages"][2]["content"][0]["tool_use_id"] == "toolu_01"
        assert body["messages"][:2] == UNANSWERED[:2]  # everything else as it was


def test_openai_chat_and_responses_sync_and_async(provider: tuple[Provider, str]) -> None:
    stand_in, url = provider
    with openai.OpenAI(base_url=f"{url}/v1", **KW) as plain:
        with pytest.raises(openai.BadRequestError):
            plain.chat.completions.create(model="m", messages=HUGE_CHAT)  # over the window
        client = middleware.wrap(plain, policy="preset:pi", session_id="sdk-test")
        assert client.chat.completions.create(model="m", messages=HUGE_CHAT).choices
        chunks = list(client.chat.completions.create(model="m", messages=HUGE_CHAT, stream=True))
        assert chunks
        items = [
            {"type": "message", "role": "user", "content": "go"},
            {"type": "function_call", "call_id": "c9", "name": "ls", "arguments": "{}"},
        ]
        assert client.responses.create(model="m", input=items).output_text == "ok"

    async def use_async() -> None:
        async with middleware.wrap(openai.AsyncOpenAI(base_url=f"{url}/v1", **KW)) as aio:
            completion = await aio.chat.completions.create(model="m", messages=HUGE_CHAT)
            assert completion.choices[0].message.content == "ok"
            stream = await aio.chat.completions.create(model="m", messages=HUGE_CHAT, stream=True)
            assert [chunk async for chunk in stream]

    asyncio.run(use_async())
    sent = [b for p, _, b in stand_in.accepted if p == "/v1/chat/completions"]
    assert len(sent) == 4
    assert all(len(b["messages"][2]["content"]) < 60_000 for b in sent)


def test_async_anthropic_streams(provider: tuple[Provider, str]) -> None:
    stand_in, url = provider

    async def use_async() -> str:
        client = middleware.wrap(anthropic.AsyncAnthropic(base_url=url, **KW))
        async with (
            client,
            client.messages.stream(model="m", max_tokens=9, messages=UNANSWERED) as stream,
        ):
            return str(await stream.get_final_text())

    assert asyncio.run(use_async()) == "ok"
    assert not stand_in.refused


def test_a_failing_pipeline_sends_the_request_as_it_was(
    provider: tuple[Provider, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in, url = provider

    def bug(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(middleware.Pipeline, "process", bug)
    with (
        middleware.wrap(anthropic.Anthropic(base_url=url, **KW)) as client,
        pytest.raises(anthropic.BadRequestError),  # the provider's verdict, not ours
    ):
        client.messages.create(model="m", max_tokens=9, messages=UNANSWERED)
    assert stand_in.refused[-1][2]["messages"] == UNANSWERED


def test_only_sdk_clients_can_be_wrapped() -> None:
    with pytest.raises(TypeError, match="official anthropic or openai SDK"):
        middleware.wrap(object())
