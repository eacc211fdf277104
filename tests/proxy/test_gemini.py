"""Gemini ``generateContent`` through the proxy, with the google-genai SDK pointed at it by
its base URL (sync and async, streamed and not): histories Gemini refuses (a call left
without its response, the duplicated responses of a resumed Gemini CLI session, an output
over the window) go through and succeed; sent directly they get Gemini's 400. The key
passes through as a header or as ``key=``; a call's ``thoughtSignature`` comes back as the
model gave it; the answer's usage reaches the ledger."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from proxy_stack import Stack, running
from stand_in import Call, Provider, Reply

genai = pytest.importorskip("google.genai", reason="the google-genai SDK tests need it")
from google.genai import errors, types  # noqa: E402

HUGE = "log line with some detail\n" * 6_000  # 156,000 chars: over the stand-in's window
MODEL = "gemini-2.5-pro"
CALL = {"functionCall": {"name": "run_shell_command", "args": {"command": "make"}}}


def response(output: str, call_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "run_shell_command", "response": {"output": output}}
    return {"functionResponse": {**({"id": call_id} if call_id else {}), **body}}


def history(kind: str) -> list[dict[str, Any]]:
    """What Gemini refuses: a call without its response, the response twice (a resumed
    Gemini CLI session sends each old one twice), an output over the window."""
    head = [{"role": "user", "parts": [{"text": "Build it."}]}]
    if kind == "unanswered":
        return [
            *head,
            {"role": "model", "parts": [CALL]},
            {"role": "user", "parts": [{"text": "Did it work?"}]},
        ]
    if kind == "duplicated":
        called = {"functionCall": {**CALL["functionCall"], "id": "run_shell_command_17_0"}}
        twice = [response("built", "run_shell_command_17_0")] * 2
        return [
            *head,
            {"role": "model", "parts": [called]},
            {"role": "user", "parts": twice},
            {"role": "model", "parts": [{"text": "Built."}]},
            {"role": "user", "parts": [{"text": "Now test it."}]},
        ]
    return [*head, {"role": "model", "parts": [CALL]}, {"role": "user", "parts": [response(HUGE)]}]


KINDS = ["unanswered", "duplicated", "oversized"]
REFUSAL = {
    "unanswered": "Please ensure that the number of function response parts is equal",
    "duplicated": "Please ensure that the number of function response parts is equal",
    "oversized": "exceeds the maximum number of tokens allowed",
}


@contextmanager
def client(base: str, **options: Any) -> Iterator[Any]:
    """The SDK's client at ``base``, closed as the block ends (one left to the collector
    keeps its connection open until then, and warns in whichever test it runs)."""
    with genai.Client(
        api_key="test-key", http_options=types.HttpOptions(base_url=base, **options)
    ) as made:
        yield made


@pytest.mark.parametrize("kind", KINDS)
def test_the_sdk_through_the_proxy_gets_answers_where_gemini_refuses(
    stack: Stack, kind: str
) -> None:
    contents = history(kind)
    with client(stack.upstream) as direct, pytest.raises(errors.ClientError) as refused:
        direct.models.generate_content(model=MODEL, contents=contents)
    assert refused.value.code == 400 and REFUSAL[kind] in str(refused.value)

    with client(stack.url) as through:
        answer = through.models.generate_content(model=MODEL, contents=contents)
        assert answer.text == "ok"
        streamed = "".join(
            c.text or ""
            for c in through.models.generate_content_stream(model=MODEL, contents=contents)
        )
        assert streamed == "ok"

    async def both() -> tuple[Any, str]:
        with client(stack.url) as made:
            async with made.aio as aio:
                one = await aio.models.generate_content(model=MODEL, contents=contents)
                chunks = await aio.models.generate_content_stream(model=MODEL, contents=contents)
                return one, "".join([c.text or "" async for c in chunks])

    one, text = asyncio.run(both())
    assert one.text == "ok" and text == "ok"
    sent = [body for path, _, body in stack.provider.accepted]
    assert len(sent) == 4 and all(body == sent[0] for body in sent)
    assert not stack.provider.refused[1:]  # only the direct request was refused


def test_what_the_proxy_repairs_and_what_it_leaves(stack: Stack) -> None:
    """The missing response is an error response named after its call; the duplicate is
    dropped; an output over the cap is spilled, its preview in the same ``output`` key;
    every other field of the body is sent as it came."""
    body = {
        "contents": [
            *history("unanswered")[:2],
            {"role": "user", "parts": [{"text": "Did it work?"}]},
        ],
        "systemInstruction": {"role": "user", "parts": [{"text": "You are terse."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "run_shell_command", "parametersJsonSchema": {"type": "object"}}
                ]
            }
        ],
        "generationConfig": {"temperature": 1, "thinkingConfig": {"includeThoughts": True}},
    }
    url = f"{stack.url}/v1beta/models/{MODEL}:generateContent"
    answer = httpx.post(url, json=body, headers={"x-goog-api-key": "test-key"})
    assert answer.status_code == 200, answer.text
    sent = stack.provider.accepted[-1][2]
    assert {k: v for k, v in sent.items() if k != "contents"} == {
        k: v for k, v in body.items() if k != "contents"
    }
    repaired = sent["contents"][2]["parts"]
    assert repaired[0]["functionResponse"]["name"] == "run_shell_command"
    assert "Tool result missing" in repaired[0]["functionResponse"]["response"]["error"]
    assert "id" not in repaired[0]["functionResponse"]  # the call had none
    assert repaired[1] == {"text": "Did it work?"}  # after the response, as Gemini wants

    big = {"contents": history("oversized")}
    answer = httpx.post(url + "?key=test-key", json=big)  # the key as a query parameter
    assert answer.status_code == 200, answer.text
    path, _, sent = stack.provider.accepted[-1]
    output = sent["contents"][2]["parts"][0]["functionResponse"]["response"]["output"]
    assert len(output) < 6_000 and "full output saved to" in output
    assert path.endswith(":generateContent")


def test_a_signed_call_keeps_its_signature_through_a_repair(stack: Stack) -> None:
    """Gemini 3 refuses a turn whose signed call comes back without its signature: a
    repaired turn (one of its two calls left unanswered) keeps it on the call."""
    stack.provider.script = lambda fmt, body: _two_calls(body)
    with client(stack.url) as through:
        first = through.models.generate_content(model=MODEL, contents="Build and test it.")
        parts = first.candidates[0].content.parts
        assert parts[0].thought_signature is not None and len(parts) == 2
        model_turn = first.candidates[0].content.model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        answered = {"role": "user", "parts": [{"functionResponse": {
            "name": parts[0].function_call.name, "response": {"output": "built"}}}]}  # fmt: skip
        contents = [
            {"role": "user", "parts": [{"text": "Build and test it."}]},
            model_turn,
            answered,
        ]
        second = through.models.generate_content(model=MODEL, contents=contents)
    assert second.text == "ok"
    sent = stack.provider.accepted[-1][2]["contents"]
    assert sent[1] == json.loads(json.dumps(model_turn))  # the model's turn as it came
    assert len(sent[2]["parts"]) == 2  # and a response for each call


def _two_calls(body: dict[str, Any]) -> Reply:
    if len(body["contents"]) == 1:
        return Reply(calls=(Call("make", {"target": "all"}), Call("make", {"target": "test"})))
    return Reply(text="ok")


def test_usage_reaches_the_ledger(stack: Stack) -> None:
    with client(stack.url) as through:
        through.models.generate_content(model=MODEL, contents="Hello")
        list(through.models.generate_content_stream(model=MODEL, contents="Hello"))
    total = httpx.get(stack.url + "/sessions").json()["total"]
    assert total["requests"] == 2
    assert total["billed"]["input"] == 20 and total["billed"]["output"] == 10


def test_vertex_ai_paths_are_cleaned_too(stack: Stack) -> None:
    """With ``proxy.upstreams.gemini`` at a Vertex AI endpoint, its model paths (OAuth
    bearer, not a key) are cleaned like the Developer API's."""
    path = (
        "/v1/projects/p1/locations/us-central1/publishers/google/models/gemini-2.5-pro"
        ":streamGenerateContent?alt=sse"
    )
    body = {"contents": history("unanswered")}
    bearer = {"authorization": "Bearer ya29.token"}
    assert httpx.post(stack.upstream + path, json=body, headers=bearer).status_code == 400
    answer = httpx.post(stack.url + path, json=body, headers=bearer)
    assert answer.status_code == 200 and "data: " in answer.text
    sent = stack.provider.accepted[-1][2]["contents"]
    assert "error" in sent[2]["parts"][0]["functionResponse"]["response"]


def test_what_the_proxy_answers_itself_is_in_googles_shape(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    """A body over ``proxy.max_body_bytes``: the SDK raises its usual error, with Google's
    code and status, and the message says which setting to change."""
    with (
        running(provider, tmp_path, **{"proxy.max_body_bytes": 2_000}) as small,
        client(small.url) as through,
        pytest.raises(errors.ClientError) as refused,
    ):
        through.models.generate_content(model=MODEL, contents=history("oversized"))
    assert refused.value.code == 413 and refused.value.status == "INVALID_ARGUMENT"
    assert "proxy.max_body_bytes" in str(refused.value)
