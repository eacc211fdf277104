"""A stand-in for the model providers, served on loopback: it enforces their rules on the
history (answering 400 with their own error texts, docs in ../shared/reference/
peer-systems.md), records every body it accepts, and answers like the real APIs, streamed
(server-sent events) or not, in the Anthropic Messages, Chat Completions, Responses and
Gemini ``generateContent`` shapes, so the official SDKs and real agents can talk to it.

What the model "says" comes from a script: a function of the request that returns text or
tool calls, so a multi-turn agent session can be played.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from prompt_cache import PromptCache, output_tokens
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import middleware
from middleware.errors import MiddlewareError

#: Characters a request may hold before the stand-in says the prompt is too long (a model
#: with a small window: what one huge tool output breaks).
CONTEXT_CHARS = 120_000


@dataclass(frozen=True)
class Call:
    """A tool call the scripted model makes."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    text: str = ""
    calls: tuple[Call, ...] = ()


Script = Callable[[str, dict[str, Any]], Reply]


def say_ok(fmt: str, body: dict[str, Any]) -> Reply:
    return Reply(text="ok")


@dataclass
class Provider:
    """The stand-in's state: the script and what it received."""

    script: Script = say_ok
    #: Keep what was accepted and refused (off for benchmarks: memory would grow).
    record: bool = True
    #: Characters of history over which the prompt is too long.
    context_chars: int = CONTEXT_CHARS
    #: Emulates the provider's prompt cache: each answer reports the usage it bills (cache
    #: reads and writes); None reports a fixed usage.
    cache: PromptCache | None = None
    #: (path, headers, body) of every request accepted.
    accepted: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    #: The bytes of every request body accepted, as they came.
    raw: list[bytes] = field(default_factory=list)
    #: (path, error message, body) of every request refused.
    refused: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: The slow stream (/v1/slow-stream) waits for this before its second chunk, and
    #: records whether it was cancelled (the client went away) in ``cancelled``.
    release: threading.Event = field(default_factory=threading.Event)
    cancelled: threading.Event = field(default_factory=threading.Event)
    #: The ``thoughtSignature`` of each call the Gemini stand-in signed, by its name and
    #: arguments (two sessions may make the same call, each signed its own way).
    signatures: dict[str, set[str]] = field(default_factory=dict)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/slow-stream", self.slow_stream, methods=["GET", "POST"]),
                Route("/v1/messages", self.messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self.count_tokens, methods=["POST"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/responses", self.responses, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/v1/echo-headers", self.echo_headers, methods=["GET", "POST"]),
                Route("/v1beta/models/{rest:path}", self.gemini, methods=["POST"]),
                Route("/v1/models/{rest:path}", self.gemini, methods=["POST"]),
                Route("/v1/projects/{rest:path}", self.gemini, methods=["POST"]),  # Vertex AI
                Route("/v1beta1/projects/{rest:path}", self.gemini, methods=["POST"]),
            ]
        )

    # -- the rules ------------------------------------------------------------------------

    def _refusal(self, fmt: str, path: str, history: Any) -> str | None:
        if fmt == "responses" and isinstance(history, str):
            return None  # a plain text input is a valid Responses request
        try:
            violations = middleware.check_history(history, fmt)
        except MiddlewareError as exc:
            return str(exc)
        if violations:
            return violations[0].reason
        if fmt == "gemini":
            unsigned = self._unsigned_call(history)
            if unsigned is not None:
                return unsigned
        size = len(json.dumps(history, ensure_ascii=False))
        if size > self.context_chars:
            tokens, most = size // 4, self.context_chars // 4
            if fmt == "gemini":
                return (f"The input token count ({tokens}) exceeds the maximum number of tokens "
                        f"allowed ({most}).")  # fmt: skip
            return f"prompt is too long: {tokens} tokens > {most} maximum"
        return None

    def _unsigned_call(self, contents: list[dict[str, Any]]) -> str | None:
        """Gemini 3's rule: in the current turn (since the last prompt the user typed),
        each call the model signed comes back with its ``thoughtSignature`` unchanged."""
        typed = [i for i, c in enumerate(contents) if c.get("role", "user") == "user"
                 and any("text" in p for p in c.get("parts", []))]  # fmt: skip
        for content in contents[typed[-1] + 1 if typed else 0 :]:
            for k, part in enumerate(content.get("parts", [])):
                call = part.get("functionCall")
                signed = self.signatures.get(_call_key(call)) if call else None
                if signed is not None and part.get("thoughtSignature") not in signed:
                    return ("Function call is missing a thought_signature in functionCall "
                            f"parts. This is required for tools to work correctly, and missing "
                            f"thought_signature may lead to degraded model performance. "
                            f"Additional data, function call `default_api:{call['name']}` , "
                            f"position {k + 1}. Please refer to https://ai.google.dev/gemini-api/"
                            "docs/thought-signatures for more details.")  # fmt: skip
        return None

    async def _accept(self, request: Request, fmt: str, key: str) -> dict[str, Any] | Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            return error(fmt, "There was an error parsing the body of your request as JSON.")
        refusal = self._refusal(fmt, request.url.path, body.get(key))
        if refusal is not None:
            if self.record:
                with self.lock:
                    self.refused.append((request.url.path, refusal, body))
            return error(fmt, refusal)
        if self.record:
            with self.lock:
                self.accepted.append((request.url.path, dict(request.headers), body))
                self.raw.append(raw)
        return body

    # -- Anthropic -------------------------------------------------------------------------

    async def messages(self, request: Request) -> Response:
        body = await self._accept(request, "anthropic", "messages")
        if isinstance(body, Response):
            return body
        reply = self.script("anthropic", body)
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        content += [
            {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:20]}",
                "name": c.name,
                "input": c.arguments,
            }
            for c in reply.calls
        ]
        message = {
            "id": f"msg_{uuid.uuid4().hex[:20]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "stand-in"),
            "content": content,
            "stop_reason": "tool_use" if reply.calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        start_usage = None
        if self.cache is not None:
            message["usage"] = billed(self.cache, "anthropic", body, reply)
            # Streamed, the input and cache fields come first, the output at the end.
            start_usage = {**message["usage"], "output_tokens": 1}
        if not body.get("stream"):
            return JSONResponse(message)
        return sse(anthropic_events(message, start_usage))

    async def count_tokens(self, request: Request) -> Response:
        body = await self._accept(request, "anthropic", "messages")
        if isinstance(body, Response):
            return body
        return JSONResponse({"input_tokens": len(json.dumps(body["messages"])) // 4})

    # -- OpenAI Chat Completions ------------------------------------------------------------

    async def chat(self, request: Request) -> Response:
        body = await self._accept(request, "openai", "messages")
        if isinstance(body, Response):
            return body
        reply = self.script("openai", body)
        calls = [
            {
                "id": f"call_{uuid.uuid4().hex[:20]}",
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for c in reply.calls
        ]
        ident, model = f"chatcmpl-{uuid.uuid4().hex[:20]}", body.get("model", "stand-in")
        finish = "tool_calls" if calls else "stop"
        # Billed whether or not a stream reports it.
        usage: dict[str, Any] = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if self.cache is not None:
            usage = billed(self.cache, "openai", body, reply)
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
            if calls:
                message["tool_calls"] = calls
            return JSONResponse(
                {
                    "id": ident,
                    "object": "chat.completion",
                    "created": 0,
                    "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            )

        async def chunks() -> AsyncIterator[str]:
            def chunk(delta: dict[str, Any], reason: str | None = None) -> str:
                return json.dumps(
                    {
                        "id": ident,
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": model,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
                    }
                )

            yield chunk({"role": "assistant", "content": ""})
            for piece in split(reply.text):
                yield chunk({"content": piece})
            for i, call in enumerate(calls):
                yield chunk({"tool_calls": [{"index": i, **call}]})
            yield chunk({}, finish)
            if (body.get("stream_options") or {}).get("include_usage"):
                yield json.dumps({"id": ident, "object": "chat.completion.chunk", "created": 0,
                                  "model": model, "choices": [], "usage": usage})  # fmt: skip
            yield "[DONE]"

        async def events() -> AsyncIterator[tuple[str | None, str]]:
            async for data in chunks():
                yield None, data

        return sse(events())

    # -- OpenAI Responses -----------------------------------------------------------------

    async def responses(self, request: Request) -> Response:
        body = await self._accept(request, "responses", "input")
        if isinstance(body, Response):
            return body
        reply = self.script("responses", body)
        output: list[dict[str, Any]] = []
        if reply.text:
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{uuid.uuid4().hex[:20]}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
                }
            )
        output += [
            {
                "type": "function_call",
                "id": f"fc_{uuid.uuid4().hex[:20]}",
                "call_id": f"call_{uuid.uuid4().hex[:20]}",
                "name": c.name,
                "arguments": json.dumps(c.arguments),
                "status": "completed",
            }
            for c in reply.calls
        ]
        response = {
            "id": f"resp_{uuid.uuid4().hex[:20]}",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": body.get("model", "stand-in"),
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 10,
                "output_tokens": 5,
                "total_tokens": 15,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        if self.cache is not None:
            response["usage"] = billed(self.cache, "responses", body, reply)
        if not body.get("stream"):
            return JSONResponse(response)
        return sse(responses_events(response))

    # -- Google Gemini --------------------------------------------------------------------

    async def gemini(self, request: Request) -> Response:
        """``/v1beta/models/{model}:generateContent``, ``:streamGenerateContent`` (server-sent
        events with ``alt=sse``, else one JSON array of chunks, as Google's API answers) and
        ``:countTokens``."""
        model, _, method = request.path_params["rest"].rpartition("/")[2].partition(":")
        if method not in ("generateContent", "streamGenerateContent", "countTokens"):
            return gemini_error(404, f"Method {method!r} is not found.", "NOT_FOUND")
        if not (
            request.headers.get("x-goog-api-key")
            or request.query_params.get("key")
            or request.headers.get("authorization", "").startswith("Bearer ")
        ):  # Vertex
            return gemini_error(403, "Method doesn't allow unregistered callers (callers "
                                "without established identity). Please use API Key or "
                                "other form of API consumer identity to call this API.",
                                "PERMISSION_DENIED")  # fmt: skip
        body = await self._accept(request, "gemini", "contents")
        if isinstance(body, Response):
            return body
        if method == "countTokens":
            return JSONResponse({"totalTokens": len(json.dumps(body.get("contents"))) // 4})
        reply = self.script("gemini", body)
        parts: list[dict[str, Any]] = []
        if reply.text:
            parts.append({"text": reply.text})
        for k, c in enumerate(reply.calls):
            part: dict[str, Any] = {"functionCall": {"name": c.name, "args": c.arguments}}
            if k == 0:  # Gemini 3 signs a turn's first call; it must come back unchanged
                part["thoughtSignature"] = f"sig-{uuid.uuid4().hex[:12]}"
                with self.lock:
                    signed = self.signatures.setdefault(_call_key(part["functionCall"]), set())
                    signed.add(part["thoughtSignature"])
            parts.append(part)
        usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
        if self.cache is not None:
            usage = billed(self.cache, "gemini", body, reply)
        answer = {
            "candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": usage,
            "modelVersion": model,
            "responseId": uuid.uuid4().hex[:20],
        }  # fmt: skip
        if method == "generateContent":
            return JSONResponse(answer)
        chunks = [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": piece}]},
                             "index": 0}], "modelVersion": model}
            for piece in split(reply.text)
        ] if reply.text else []  # fmt: skip
        calls = [p for p in parts if "functionCall" in p]
        last = {**answer, "candidates": [{**answer["candidates"][0], "content": {
            "role": "model", "parts": calls or ([] if chunks else [{"text": ""}])}}]}  # fmt: skip
        chunks.append(last)
        if request.query_params.get("alt") != "sse":
            return JSONResponse(chunks)

        async def body_bytes() -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield f"data: {json.dumps(chunk)}\r\n\r\n".encode()

        return StreamingResponse(body_bytes(), media_type="text/event-stream")

    async def models(self, request: Request) -> Response:
        listing = {"object": "list", "data": [{"id": "stand-in", "object": "model"}]}
        echo = {"x-stand-in-saw": ",".join(sorted(request.headers.keys()))}
        return JSONResponse(listing, headers={"request-id": "req_stand_in", **echo})

    async def echo_headers(self, request: Request) -> Response:
        """The request's headers as their bytes came (latin-1 text of them), answered with a
        header whose value is UTF-8 (what some providers send)."""
        seen = {k.decode("latin-1"): v.decode("latin-1") for k, v in request.headers.raw}
        answer = JSONResponse(seen)
        answer.raw_headers.append((b"x-stand-in-title", "café ✓".encode()))
        return answer

    async def slow_stream(self, request: Request) -> Response:
        """One chunk, then the next only once the test releases it (or forever)."""

        async def chunks() -> AsyncIterator[bytes]:
            try:
                yield b"data: first\n\n"
                while not self.release.is_set():
                    await anyio.sleep(0.01)
                yield b"data: second\n\n"
            except BaseException:
                self.cancelled.set()
                raise

        return StreamingResponse(chunks(), media_type="text/event-stream")


def billed(cache: PromptCache, fmt: str, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """The usage the provider's cache bills for this request and reply."""
    usage = cache.usage(fmt, body, output_tokens(reply.text, [c.arguments for c in reply.calls]))
    asked = (body.get("stream_options") or {}).get("include_usage")
    if fmt == "openai" and body.get("stream") and not asked:
        cache.unsaid.append(usage)
    return usage


def error(fmt: str, message: str) -> Response:
    """A 400 in the provider's own error shape."""
    if fmt == "gemini":
        return gemini_error(400, message, "INVALID_ARGUMENT")
    if fmt == "anthropic":
        body: dict[str, Any] = {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": message},
        }
    else:
        body = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": "input" if fmt == "responses" else "messages",
                "code": None,
            }
        }
    return JSONResponse(body, status_code=400)


def _call_key(call: dict[str, Any]) -> str:
    return json.dumps([call.get("name"), call.get("args")], sort_keys=True)


def gemini_error(code: int, message: str, status: str) -> Response:
    """Google's error shape (``google.rpc.Status``)."""
    return JSONResponse({"error": {"code": code, "message": message, "status": status}},
                        status_code=code)  # fmt: skip


def split(text: str) -> list[str]:
    """A streamed text arrives in several chunks."""
    return [text[i : i + 7] for i in range(0, len(text), 7)] or []


def sse(events: Any) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        async for name, data in _aiter(events):
            head = f"event: {name}\n" if name else ""
            yield f"{head}data: {data}\n\n".encode()

    return StreamingResponse(body(), media_type="text/event-stream")


async def _aiter(events: Any) -> AsyncIterator[tuple[str | None, str]]:
    if hasattr(events, "__aiter__"):
        async for item in events:
            yield item
    else:
        for item in events:
            yield item


def anthropic_events(
    message: dict[str, Any], start_usage: dict[str, Any] | None = None
) -> list[tuple[str, str]]:
    """The Messages stream of ``message``: ``message_start`` carries ``start_usage`` (the
    input and cache fields) when given, ``message_delta`` the output tokens."""
    start = {**message, "content": [], "stop_reason": None}
    if start_usage is not None:
        start["usage"] = start_usage
    events = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            for piece in split(block["text"]):
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "text_delta", "text": piece},
                        },
                    )
                )
        else:
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {**block, "input": {}},
                    },
                )
            )
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": json.dumps(block["input"]),
                        },
                    },
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return [(name, json.dumps(data)) for name, data in events]


def responses_events(response: dict[str, Any]) -> list[tuple[str, str]]:
    """Every event a Responses client waits for, in the API's order: the response created
    and in progress; per output item its ``added``, its content part or its arguments as
    deltas, each ``done``; then ``response.completed`` (clients stall without them)."""
    created = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": created},
        {"type": "response.in_progress", "response": created},
    ]
    for i, item in enumerate(response["output"]):
        if item["type"] == "message":
            part = item["content"][0]
            text = part["text"]
            started = {**item, "status": "in_progress", "content": []}
            events.append({"type": "response.output_item.added", "output_index": i,
                           "item": started})  # fmt: skip
            where = {"output_index": i, "item_id": item["id"], "content_index": 0}
            events.append({"type": "response.content_part.added", **where,
                           "part": {**part, "text": ""}})  # fmt: skip
            for piece in split(text):
                events.append({"type": "response.output_text.delta", **where, "delta": piece,
                               "logprobs": []})  # fmt: skip
            events.append({"type": "response.output_text.done", **where, "text": text,
                           "logprobs": []})  # fmt: skip
            events.append({"type": "response.content_part.done", **where, "part": part})
        elif item["type"] == "function_call":
            started = {**item, "status": "in_progress", "arguments": ""}
            events.append({"type": "response.output_item.added", "output_index": i,
                           "item": started})  # fmt: skip
            where = {"output_index": i, "item_id": item["id"]}
            for piece in split(item["arguments"]):
                events.append({"type": "response.function_call_arguments.delta", **where,
                               "delta": piece})  # fmt: skip
            events.append({"type": "response.function_call_arguments.done", **where,
                           "arguments": item["arguments"]})  # fmt: skip
        else:
            events.append({"type": "response.output_item.added", "output_index": i,
                           "item": item})  # fmt: skip
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    events.append({"type": "response.completed", "response": response})
    return [(e["type"], json.dumps({**e, "sequence_number": n})) for n, e in enumerate(events)]
