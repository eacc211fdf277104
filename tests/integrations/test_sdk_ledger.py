"""wrap(client) bills every answer in its ledger as the SDK reads it, streamed or not, sync
or async, and with the recall tool (whose follow-up requests are billed too)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from prompt_cache import PromptCache
from servers import serving
from stand_in import Provider

import middleware
from middleware.integrations.sdk import cleaner_of
from middleware.ledger import Usage, read_usage

KW: dict[str, Any] = {"api_key": "sk-test", "max_retries": 0}
SYSTEM = [{"type": "text", "text": "Rules. " * 1_500, "cache_control": {"type": "ephemeral"}}]


@pytest.fixture
def caching() -> Iterator[tuple[Provider, str]]:
    stand_in = Provider(cache=PromptCache(), context_chars=10**8)
    with serving(stand_in.app()) as url:
        yield stand_in, url


def reported(stand_in: Provider, fmt: str) -> Usage:
    assert stand_in.cache is not None
    total = Usage()
    for kind, usage in stand_in.cache.reported:
        if kind == fmt:
            total += read_usage(fmt, usage) or Usage()
    return total


def history(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Look around."}]
    for n in range(turns):
        use = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"cmd": "ls"}}
        lines = "\n".join(f"dir_{n}/file_{i}.py  {i * 31} bytes" for i in range(2_000))
        messages += [
            {"role": "assistant", "content": [use]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": lines}],
            },
        ]
    return messages


def test_wrapped_anthropic_clients_bill_what_the_provider_reported(
    caching: tuple[Provider, str],
) -> None:
    stand_in, url = caching
    headers = {"x-chatcli-session": "wrapped"}
    with anthropic.Anthropic(base_url=url, **KW) as plain:
        client = middleware.wrap(plain)
        for turns in (1, 2, 3):
            body = {"model": "claude-opus-5", "max_tokens": 9, "system": SYSTEM,
                    "messages": history(turns), "extra_headers": headers}  # fmt: skip
            if turns == 2:
                with client.messages.stream(**body) as stream:
                    stream.get_final_text()
            else:
                client.messages.create(**body)
        client.messages.count_tokens(model="claude-opus-5", messages=history(1))  # not billed

        async def more() -> None:
            async with anthropic.AsyncAnthropic(base_url=url, **KW) as plain_async:
                wrapped = middleware.wrap(plain_async)
                await wrapped.messages.create(
                    model="claude-opus-5", max_tokens=9, messages=history(1), extra_headers=headers
                )
                async with wrapped.messages.stream(
                    model="claude-opus-5", max_tokens=9, messages=history(2), extra_headers=headers
                ) as stream:
                    await stream.get_final_text()
                # One ledger for the process: the sync client's three answers are in it.
                assert cleaner_of(wrapped).ledger.total()["requests"] == 5

        asyncio.run(more())
        ledger = cleaner_of(client).ledger.session("wrapped")
    billed = reported(stand_in, "anthropic")
    assert ledger is not None and ledger["requests"] == 5 and ledger["unread"] == 0
    # Both clients' answers, in the records of the process (the state folder's database).
    assert {k: ledger["billed"][k] for k in billed.as_dict()} == billed.as_dict()
    assert billed.cache_read > 0 and ledger["billed"]["cache_read"] > 0
    assert ledger["without"]["cache_write_5m"] + ledger["without"]["cache_read"] > (
        billed.prompt
    )  # the spilled listings would have been sent


def test_wrapped_openai_clients_bill_streams_that_report_usage(
    caching: tuple[Provider, str],
) -> None:
    stand_in, url = caching
    with openai.OpenAI(base_url=f"{url}/v1", **KW) as plain:
        client = middleware.wrap(plain, session_id="chat")
        messages = [
            {"role": "system", "content": "Rules. " * 1_500},
            {"role": "user", "content": "hi"},
        ]
        client.chat.completions.create(model="gpt-5", messages=messages)  # type: ignore[arg-type]
        for _ in client.chat.completions.create(
            model="gpt-5",
            messages=messages,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        ):
            pass
        client.responses.create(model="gpt-5", input=[{"role": "user", "content": "hi"}])
        ledger = cleaner_of(client).ledger.session("chat")
    chat, responses = reported(stand_in, "openai"), reported(stand_in, "responses")
    assert ledger is not None and ledger["requests"] == 3 and ledger["unread"] == 0
    assert ledger["billed"]["cache_read"] == chat.cache_read + responses.cache_read > 0
    assert ledger["billed"]["input"] == chat.input + responses.input
    assert ledger["billed"]["dollars"] > 0 and ledger["models"] == {"gpt-5": 3}
