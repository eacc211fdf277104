"""middleware.wrap(client) on the google-genai SDK's client: its Gemini requests are cleaned
whatever method sent them (sync, ``client.aio``, streamed, token counts), their usage is
billed, and the recall tool is answered in the transport; the client is otherwise the
same."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agent_events import events
from recall_model import RECALL_SAID, recalling
from stand_in import Provider

import middleware
from middleware.integrations.sdk import cleaner_of

genai = pytest.importorskip("google.genai", reason="the google-genai SDK tests need it")
from google.genai import errors, types  # noqa: E402

UNANSWERED = [
    {"role": "user", "parts": [{"text": "Build it."}]},
    {"role": "model", "parts": [{"functionCall": {"name": "make", "args": {}}}]},
    {"role": "user", "parts": [{"text": "Did it work?"}]},
]
MODEL = "gemini-2.5-flash"


def client(url: str) -> Any:
    return genai.Client(api_key="test-key", http_options=types.HttpOptions(base_url=url))


def test_every_method_of_the_genai_client_is_cleaned(provider: tuple[Provider, str]) -> None:
    stand_in, url = provider
    plain = client(url)
    with pytest.raises(errors.ClientError):
        plain.models.generate_content(model=MODEL, contents=UNANSWERED)
    wrapped = middleware.wrap(plain)
    assert wrapped.models.generate_content(model=MODEL, contents=UNANSWERED).text == "ok"
    chunks = wrapped.models.generate_content_stream(model=MODEL, contents=UNANSWERED)
    assert "".join(c.text or "" for c in chunks) == "ok"
    assert wrapped.models.count_tokens(model=MODEL, contents=UNANSWERED).total_tokens > 0

    async def through_aio() -> str:
        one = await wrapped.aio.models.generate_content(model=MODEL, contents=UNANSWERED)
        streamed = await wrapped.aio.models.generate_content_stream(
            model=MODEL, contents=UNANSWERED
        )
        text = (one.text or "") + "".join([c.text or "" async for c in streamed])
        await wrapped.aio.aclose()
        return text

    assert asyncio.run(through_aio()) == "okok"
    report = cleaner_of(wrapped).last
    assert report is not None and report.report is not None
    assert [a.kind for a in report.report.actions] == ["synthetic_result"]
    bodies = [b for p, _, b in stand_in.accepted]
    assert len(bodies) == 5
    for body in bodies:
        assert body["contents"][:2] == UNANSWERED[:2]  # everything else as it was
        response = body["contents"][2]["parts"][0]["functionResponse"]
        assert response["name"] == "make" and "error" in response["response"]
    # Billed: four answers reported their usage (a token count is not billed).
    assert cleaner_of(wrapped).ledger.total()["requests"] == 4
    wrapped.close()
    plain.close()


BIG = "".join(f"build step {i}\n" for i in range(1, 2001))
TOOLS = [types.Tool(function_declarations=[types.FunctionDeclaration(
    name="build", description="b", parameters_json_schema={"type": "object"})])]  # fmt: skip


def test_the_recall_tool_is_answered_in_the_transport_and_never_offered_to_a_stream(
    provider: tuple[Provider, str],
) -> None:
    stand_in, url = provider
    stand_in.script = recalling
    plain = client(url)
    wrapped = middleware.wrap(plain, recall_tool=True)
    config = types.GenerateContentConfig(tools=TOOLS)
    history: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "Build it."}]}]
    first = wrapped.models.generate_content(model=MODEL, contents=history, config=config)
    (call,) = first.function_calls or []
    assert call.name == "build"
    history += [
        first.candidates[0].content.model_dump(mode="json", by_alias=True, exclude_none=True),
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "build", "response": {"output": BIG}}}],
        },
    ]
    final = wrapped.models.generate_content(model=MODEL, contents=history, config=config)
    assert final.function_calls is None  # the agent never sees the recall call
    bodies = [b for _, _, b in stand_in.accepted]
    said = RECALL_SAID.search(events("gemini", bodies[1])[-1].text)
    assert said is not None
    first_line, count = int(said.group(2)), int(said.group(3))
    assert final.text == f"read back {count} lines from 'build step {first_line}'"
    read = [e.text for e in events("gemini", bodies[2]) if e.kind == "result"][-1]
    assert read == "".join(f"build step {i}\n" for i in range(first_line, first_line + count))
    declared = [d["name"] for t in bodies[1]["tools"] for d in t["functionDeclarations"]]
    assert declared == ["build", "recall"]

    # Streamed by its path, the answer would reach the agent before a recall call could be
    # answered: the tool is not offered and the preview says how to read with a shell.
    streamed = wrapped.models.generate_content_stream(model=MODEL, contents=history, config=config)
    assert "".join(c.text or "" for c in streamed)
    sent = stand_in.accepted[-1][2]
    assert [d["name"] for t in sent["tools"] for d in t["functionDeclarations"]] == ["build"]
    assert "sed -n" in events("gemini", sent)[-1].text
    wrapped.close()
    plain.close()  # its connections are the ones the wrapped client sent through


def test_an_agent_declaring_its_own_recall_among_its_functions_is_never_offered_ours() -> None:
    from middleware.integrations import recall

    own = {"functionDeclarations": [{"name": "build"}, {"name": "recall"}]}  # one Tool, two
    body = {"contents": UNANSWERED, "tools": [own]}
    assert recall.offered("gemini", body) is None
    offered = recall.offered(
        "gemini", {**body, "tools": [{"functionDeclarations": [{"name": "build"}]}]}
    )
    assert offered is not None and offered["tools"][-1] == recall.definition("gemini")
