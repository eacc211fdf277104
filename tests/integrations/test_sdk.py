"""middleware.wrap(client): every model request of the official SDK clients has its
history cleaned, whatever method sent it; the client is otherwise the same (issue 15, item 2)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from agent_events import events
from recall_model import RECALL_SAID, recalling
from stand_in import Call, Provider, Reply
from waiting import wait_for

import middleware
from middleware.conversations import engine
from middleware.integrations.sdk import cleaner_of

UNANSWERED = [
    {"role": "user", "content": "Build it."},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {"cmd": "make"}}
        ],
    },
    {"role": "user", "content": "Did it work?"},
]
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

    monkeypatch.setattr(engine, "process", bug)
    with (
        middleware.wrap(anthropic.Anthropic(base_url=url, **KW)) as client,
        pytest.raises(anthropic.BadRequestError),  # the provider's verdict, not ours
    ):
        client.messages.create(model="m", max_tokens=9, messages=UNANSWERED)
    assert stand_in.refused[-1][2]["messages"] == UNANSWERED


def test_only_sdk_clients_can_be_wrapped() -> None:
    with pytest.raises(TypeError, match="official anthropic, openai or google-genai SDK"):
        middleware.wrap(object())


BIG = "".join(f"build step {i}\n" for i in range(1, 2001))


def agent_loop(send: Any, fmt: str) -> tuple[str, list[dict[str, Any]]]:
    """A plain agent loop that knows one tool, ``build``: it would crash on a call to any
    other, so a recall call must never reach it."""
    history: list[dict[str, Any]] = (
        [{"type": "message", "role": "user", "content": "Build it."}]
        if fmt == "responses"
        else [{"role": "user", "content": "Build it."}]
    )
    for _ in range(4):
        answer = send(history)
        calls = events(fmt, {"messages": [answer]} if fmt != "responses" else {"input": answer})
        names = [e.name for e in calls if e.kind == "call"]
        if not names:
            return _text_of(answer), history
        assert names == ["build"], names
        history += _answered(fmt, answer, BIG)
    raise AssertionError("the loop did not end")


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "responses"])
def test_the_recall_tool_is_answered_in_the_transport(
    fmt: str, provider: tuple[Provider, str]
) -> None:
    stand_in, url = provider
    stand_in.script = recalling
    tools_of = {
        "anthropic": [{"name": "build", "description": "b", "input_schema": {"type": "object"}}],
        "openai": [{"type": "function", "function": {"name": "build", "parameters": {}}}],
        "responses": [{"type": "function", "name": "build", "parameters": {}}],
    }
    plain: Any = (
        anthropic.Anthropic(base_url=url, **KW)
        if fmt == "anthropic"
        else openai.OpenAI(base_url=f"{url}/v1", **KW)
    )
    client: Any = middleware.wrap(plain, recall_tool=True)

    def send(history: list[dict[str, Any]]) -> Any:
        if fmt == "anthropic":
            return client.messages.create(
                model="m", max_tokens=99, messages=history, tools=tools_of[fmt]
            ).model_dump()
        if fmt == "openai":
            answer = client.chat.completions.create(
                model="m", messages=history, tools=tools_of[fmt]
            )
            return answer.choices[0].message.model_dump()
        output = client.responses.create(model="m", input=history, tools=tools_of[fmt]).output
        return [item.model_dump() for item in output]

    text, _ = agent_loop(send, fmt)
    bodies = [b for _, _, b in stand_in.accepted]
    said = RECALL_SAID.search(events(fmt, bodies[1])[-1].text)
    assert said is not None
    first, count = int(said.group(2)), int(said.group(3))
    assert text == f"read back {count} lines from 'build step {first}'"
    read = [e.text for e in events(fmt, bodies[2]) if e.kind == "result"][-1]
    assert read == "".join(f"build step {i}\n" for i in range(first, first + count))
    assert all(any(recall_name(t) == "recall" for t in b["tools"]) for b in bodies)
    # The follow-up the transport sends shows the agent's output as the first request did.
    previews = next(e.text for e in events(fmt, bodies[2]) if e.kind == "result")
    assert previews == events(fmt, bodies[1])[-1].text
    client.close()


def recall_name(tool: dict[str, Any]) -> Any:
    return tool.get("name") or tool.get("function", {}).get("name")


def _text_of(answer: Any) -> str:
    if isinstance(answer, list):  # Responses output items
        return "".join(c["text"] for i in answer if i["type"] == "message" for c in i["content"])
    content = answer.get("content")
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content)
    return str(content or "")


def _answered(fmt: str, answer: Any, output: str) -> list[dict[str, Any]]:
    """The agent's turn and its ``build`` results, in the history's format."""
    if fmt == "responses":
        calls = [i for i in answer if i["type"] == "function_call"]
        return [
            *({k: v for k, v in i.items() if v is not None} for i in answer),
            *(
                {"type": "function_call_output", "call_id": c["call_id"], "output": output}
                for c in calls
            ),
        ]
    if fmt == "openai":
        message = {k: v for k, v in answer.items() if v is not None or k == "content"}
        return [message, *({"role": "tool", "tool_call_id": c["id"], "content": output}
                           for c in answer["tool_calls"])]  # fmt: skip
    blocks = [b for b in answer["content"] if b["type"] == "tool_use"]
    return [{"role": "assistant", "content": [
                {k: v for k, v in b.items() if v is not None} for b in answer["content"]]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": b["id"],
                                          "content": output} for b in blocks]}]  # fmt: skip


def test_the_async_client_answers_recall_too_and_a_streamed_request_is_not_offered_it(
    provider: tuple[Provider, str],
) -> None:
    stand_in, url = provider
    stand_in.script = recalling
    tools = [{"name": "build", "description": "b", "input_schema": {"type": "object"}}]
    client: Any = middleware.wrap(anthropic.AsyncAnthropic(base_url=url, **KW), recall_tool=True)

    async def send(history: list[dict[str, Any]]) -> Any:
        answer = await client.messages.create(
            model="m", max_tokens=9, messages=history, tools=tools
        )
        return answer.model_dump()

    async def run() -> str:
        history: list[dict[str, Any]] = [{"role": "user", "content": "Build it."}]
        first = await send(history)
        history += _answered("anthropic", first, BIG)
        final = await send(history)
        # Streamed, the answer would reach the agent before a recall call could be
        # answered: the tool is not offered and the preview says how to read with a shell.
        async with client.messages.stream(
            model="m", max_tokens=9, messages=history, tools=tools
        ) as stream:
            await stream.get_final_message()
        await client.close()
        return _text_of(final)

    assert asyncio.run(run()).startswith("read back ")
    streamed = stand_in.accepted[-1][2]
    assert streamed["stream"] is True and [t["name"] for t in streamed["tools"]] == ["build"]
    assert "sed -n" in events("anthropic", streamed)[-1].text


def test_recall_beside_the_agents_own_tools_is_taken_out_of_the_answer(
    provider: tuple[Provider, str],
) -> None:
    stand_in, url = provider

    def both(fmt: str, body: dict[str, Any]) -> Reply:
        return Reply(calls=(Call("recall", {"path": "/nowhere"}), Call("build", {})))

    stand_in.script = both
    tools = [{"type": "function", "function": {"name": "build", "parameters": {}}}]
    client: Any = middleware.wrap(openai.OpenAI(base_url=f"{url}/v1", **KW), recall_tool=True)
    answer = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "go"}], tools=tools
    )
    assert [c.function.name for c in answer.choices[0].message.tool_calls] == ["build"]
    client.close()


WATCHED = "version: 1\nname: {name}\nproxy:\n  session_memory_bytes: {memory}\n"


def test_a_watched_policy_file_is_one_source_every_request_reads(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    """wrap(client, path, watch=True): every valid edit of the file is swapped in for the
    requests that follow, the recall tool's policy too, and the pool follows its budget."""
    _, url = provider
    path = tmp_path / "policy.yaml"
    path.write_text(WATCHED.format(name="one", memory=1_000_000), encoding="utf-8")
    with anthropic.Anthropic(base_url=url, **KW) as plain:
        client = middleware.wrap(plain, path, recall_tool=True, watch=True)
        cleaner = cleaner_of(client)
        args: dict[str, Any] = {"model": "m", "max_tokens": 9, "messages": UNANSWERED}
        client.messages.create(**args)
        assert cleaner.last is not None and cleaner.last.report is not None
        assert cleaner.last.report.policy == "one" and cleaner.pool.max_bytes == 1_000_000
        path.write_text(WATCHED.format(name="two", memory=2_000_000), encoding="utf-8")
        assert wait_for(lambda: cleaner.source.policy.name == "two")
        assert cleaner.source.status.generation == 2 and cleaner.pool.max_bytes == 2_000_000
        assert wait_for(
            lambda: cleaner.tool_policy is not None and cleaner.tool_policy.name == "two"
        )
        assert cleaner.tool_policy is not None and cleaner.tool_policy.get("recall.form") == "tool"
        client.messages.create(**args)
        assert cleaner.last.report is not None and cleaner.last.report.policy == "two"
        cleaner.close()  # stops watching
    with pytest.raises(TypeError, match="watch=True needs the path of a policy file"):
        middleware.wrap(plain, middleware.load_policy(None), watch=True)
