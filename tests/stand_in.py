"""A stand-in for the model providers, served on loopback: it enforces their rules on the
history (answering 400 with their own error texts, docs in ../shared/reference/
peer-systems.md), records every body it accepts, and answers like the real APIs, streamed
(server-sent events) or not, in the Anthropic Messages, Chat Completions, Responses and
Gemini ``generateContent`` shapes, so the official SDKs and real agents can talk to it.

What the model "says" comes from a script: a function of the request that returns text or
tool calls, so a multi-turn agent session can be played.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
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
#: The one argument of a freeform call (:attr:`Call.freeform`): its whole text.
FREEFORM = "input"


@dataclass(frozen=True)
class Call:
    """A tool call the scripted model makes. A ``freeform`` one calls a freeform (custom)
    tool, such as Codex CLI's ``apply_patch``: its whole text is ``arguments[FREEFORM]``, and
    the Responses API sends it as a ``custom_tool_call`` whose ``input`` is that text (the
    other APIs, which have no freeform tools, as an ordinary call with those arguments)."""

    name: str
    arguments: dict[str, Any]
    freeform: bool = False

    def __post_init__(self) -> None:
        if self.freeform and set(self.arguments) != {FREEFORM}:
            raise ValueError(f"a freeform call has one argument, {FREEFORM!r}: its text")


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
    #: Every compaction the stand-in issued, as it issued it, by its opaque content (a
    #: Responses ``compaction`` item's ``encrypted_content``, an Anthropic ``compaction``
    #: block's): what a later request must send back unchanged. A test replaying recorded
    #: requests registers the items the recorded run was given (:meth:`issued`).
    compactions: dict[str, dict[str, Any]] = field(default_factory=dict)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/slow-stream", self.slow_stream, methods=["GET", "POST"]),
                Route("/v1/messages", self.messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self.count_tokens, methods=["POST"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/responses", self.responses, methods=["POST"]),
                Route("/v1/responses/compact", self.compact, methods=["POST"]),
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/v1/embeddings", self.embeddings, methods=["POST"]),
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
        compacted = self._compaction_refusal(fmt, history)
        if compacted is not None:
            return compacted
        size = len(json.dumps(live(fmt, history), ensure_ascii=False))
        if size > self.context_chars:
            tokens, most = size // 4, self.context_chars // 4
            if fmt == "gemini":
                return (
                    f"The input token count ({tokens}) exceeds the maximum number of tokens "
                    f"allowed ({most})."
                )
            return f"prompt is too long: {tokens} tokens > {most} maximum"
        return None

    def _unsigned_call(self, contents: list[dict[str, Any]]) -> str | None:
        """Gemini 3's rule: in the current turn (since the last prompt the user typed),
        each call the model signed comes back with its ``thoughtSignature`` unchanged."""
        typed = [
            i
            for i, c in enumerate(contents)
            if c.get("role", "user") == "user" and any("text" in p for p in c.get("parts", []))
        ]
        for content in contents[typed[-1] + 1 if typed else 0 :]:
            for k, part in enumerate(content.get("parts", [])):
                call = part.get("functionCall")
                signed = self.signatures.get(_call_key(call)) if call else None
                if signed is not None and part.get("thoughtSignature") not in signed:
                    return (
                        "Function call is missing a thought_signature in functionCall "
                        f"parts. This is required for tools to work correctly, and missing "
                        f"thought_signature may lead to degraded model performance. "
                        f"Additional data, function call `default_api:{call['name']}` , "
                        f"position {k + 1}. Please refer to https://ai.google.dev/gemini-api/"
                        "docs/thought-signatures for more details."
                    )
        return None

    # -- compaction: what the provider issued comes back as it was issued ------------------

    def _compaction_refusal(self, fmt: str, history: Any) -> str | None:
        """Responses: a ``compaction_trigger`` item is the last input item and carries
        nothing but its type; a ``compaction`` item is one this provider issued, every field
        as issued (its ``encrypted_content`` is encrypted and signed by the provider: a
        changed or invented one cannot be read). Anthropic: a ``compaction`` block in an
        assistant message is one issued, unchanged (its ``encrypted_content``)."""
        if not isinstance(history, list):
            return None
        if fmt == "responses":
            for i, item in enumerate(history):
                kind = item.get("type") if isinstance(item, dict) else None
                if kind == "compaction_trigger":
                    if i != len(history) - 1:
                        return "The 'compaction_trigger' item must be the final input item."
                    extra = sorted(key for key in item if key != "type")
                    if extra:
                        return f"Unknown parameter: 'input[{i}].{extra[0]}'."
                elif kind in ("compaction", "compaction_summary") and not self._as_issued(item):
                    name = item.get("id") or f"input[{i}]"
                    return f"The encrypted content for item {name} could not be verified."
        elif fmt == "anthropic":
            for i, message in enumerate(history):
                content = message.get("content") if isinstance(message, dict) else None
                for k, block in enumerate(content if isinstance(content, list) else []):
                    if (
                        isinstance(block, dict)
                        and block.get("type") == "compaction"
                        and not self._as_issued(block)
                    ):
                        return (
                            f"messages.{i}.content.{k}: the compaction block's "
                            "encrypted_content could not be verified: send compaction "
                            "blocks back exactly as they were returned"
                        )
        return None

    def _as_issued(self, item: dict[str, Any]) -> bool:
        """Whether ``item`` is a compaction this provider issued: its opaque content known,
        every field it carries (``cache_control`` aside) the value issued, the same type."""
        issued = self.compactions.get(str(item.get("encrypted_content")))
        if issued is None:
            return False
        sent = {k: v for k, v in item.items() if k not in ("type", "cache_control")}
        return all(issued.get(k) == v for k, v in sent.items())

    def issued(self, item: dict[str, Any]) -> None:
        """Register ``item`` as a compaction this provider issued (for replayed requests)."""
        with self.lock:
            self.compactions[str(item["encrypted_content"])] = dict(item)

    def _compaction_item(self, seen: Any) -> dict[str, Any]:
        """A new Responses ``compaction`` item replacing the history ``seen``."""
        item = {
            "id": f"cmp_{uuid.uuid4().hex}",
            "type": "compaction",
            "encrypted_content": _sealed(seen),
        }
        self.issued(item)
        return item

    def _compaction_block(self, seen: Any) -> dict[str, Any]:
        """A new Anthropic ``compaction`` block: a summary of ``seen`` and its opaque
        metadata."""
        said = [e for m in seen for e in _said(m.get("content"))][:3]
        summary = f"Summary of {len(seen)} earlier messages: {' / '.join(said)[:300]}"
        block = {"type": "compaction", "content": summary, "encrypted_content": _sealed(seen)}
        self.issued(block)
        return block

    async def _accept(self, request: Request, fmt: str, key: str) -> dict[str, Any] | Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            return error(fmt, "There was an error parsing the body of your request as JSON.")
        refusal = self._refusal(fmt, request.url.path, body.get(key)) or _setting_refusal(fmt, body)
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
        content: list[dict[str, Any]] = []
        edit = _compact_edit(body)
        seen = live("anthropic", body["messages"])
        paused = False
        if edit is not None and tokens_of(seen) >= (edit.get("trigger") or {}).get(
            "value", 150_000
        ):
            content.append(self._compaction_block(seen))
            paused = bool(edit.get("pause_after_compaction"))
        reply = Reply() if paused else self.script("anthropic", body)
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
            "stop_reason": "compaction" if paused else "tool_use" if reply.calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        start_usage = None
        if self.cache is not None:
            message["usage"] = billed(self.cache, "anthropic", body, reply)
            # Streamed, the input and cache fields come first, the output at the end.
            start_usage = {**message["usage"], "output_tokens": 1}
        if content and content[0]["type"] == "compaction":
            # The summary's own sampling, billed apart from the top-level fields.
            message["usage"] = {**message["usage"], "iterations": [
                {"type": "compaction", "input_tokens": tokens_of(seen), "output_tokens": 40,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
                {"type": "message", **{k: v for k, v in message["usage"].items()
                                       if k.endswith("tokens")}},
            ]}  # fmt: skip
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

    async def completions(self, request: Request) -> Response:
        """``POST /v1/completions`` (legacy text completions): the prompt's text continued,
        streamed or not; ``usage`` in Chat Completions' shape (a stream's last chunk, with
        ``stream_options.include_usage``)."""
        body = await self._accept_prompt(request)
        if isinstance(body, Response):
            return body
        reply = self.script("openai", body)
        ident, model = f"cmpl-{uuid.uuid4().hex[:20]}", body.get("model", "stand-in")
        usage: dict[str, Any] = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if self.cache is not None:
            usage = billed(self.cache, "openai", body, reply)
        choice = {"text": reply.text, "index": 0, "logprobs": None, "finish_reason": "stop"}
        answer = {"id": ident, "object": "text_completion", "created": 0, "model": model}
        if not body.get("stream"):
            return JSONResponse({**answer, "choices": [choice], "usage": usage})
        chunks = [
            json.dumps({**answer, "choices": [{**choice, "text": piece, "finish_reason": None}]})
            for piece in split(reply.text)
        ]
        chunks.append(json.dumps({**answer, "choices": [{**choice, "text": ""}]}))
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append(json.dumps({**answer, "choices": [], "usage": usage}))
        return sse([(None, chunk) for chunk in [*chunks, "[DONE]"]])

    async def embeddings(self, request: Request) -> Response:
        """``POST /v1/embeddings``: a vector per input; ``usage`` holds the input's tokens."""
        body = await self._accept_prompt(request)
        if isinstance(body, Response):
            return body
        given = body.get("input")
        inputs = given if isinstance(given, list) else [given]
        usage: dict[str, Any] = {"prompt_tokens": 8, "total_tokens": 8}
        if self.cache is not None:
            counted = billed(self.cache, "openai", body, Reply())
            usage = {
                "prompt_tokens": counted["prompt_tokens"],
                "total_tokens": counted["prompt_tokens"],
            }
            self.cache.reported[-1] = ("openai", dict(usage))  # no output is billed
        data = [
            {"object": "embedding", "index": i, "embedding": [0.0, 0.5, 1.0]}
            for i in range(len(inputs))
        ]
        return JSONResponse(
            {"object": "list", "data": data, "model": body.get("model", "stand-in"), "usage": usage}
        )

    async def _accept_prompt(self, request: Request) -> dict[str, Any] | Response:
        """A body of a prompt or inputs, no history: recorded if it is JSON."""
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            return error("openai", "We could not parse the JSON body of your request.")
        if self.record:
            with self.lock:
                self.accepted.append((request.url.path, dict(request.headers), body))
                self.raw.append(raw)
        return body

    # -- OpenAI Responses -----------------------------------------------------------------

    async def responses(self, request: Request) -> Response:
        body = await self._accept(request, "responses", "input")
        if isinstance(body, Response):
            return body
        history = body.get("input")
        output: list[dict[str, Any]] = []
        if triggered(body):  # one compaction item, and nothing else
            reply = Reply()
            output.append(self._compaction_item(history[:-1]))
        else:
            threshold = _compact_threshold(body)
            if threshold is not None and tokens_of(live("responses", history)) >= threshold:
                output.append(self._compaction_item(history))  # server-side compaction
            reply = self.script("responses", body)
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
        output += [responses_call(c) for c in reply.calls]
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

    async def compact(self, request: Request) -> Response:
        """``POST /v1/responses/compact`` (Codex CLI's remote compaction v1, the SDKs'
        ``responses.compact``): the history's user messages, then one ``compaction`` item
        standing for the rest; one JSON answer, never streamed."""
        body = await self._accept(request, "responses", "input")
        if isinstance(body, Response):
            return body
        given = body.get("input")
        history = given if isinstance(given, list) else [{"role": "user", "content": given}]
        kept = [
            item
            for item in history
            if isinstance(item, dict)
            and item.get("role") == "user"
            and item.get("type", "message") == "message"
        ]
        usage: dict[str, Any] = {
            "input_tokens": tokens_of(history),
            "output_tokens": 50,
            "total_tokens": tokens_of(history) + 50,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        if self.cache is not None:
            usage = billed(self.cache, "responses", body, Reply(text="compacted " * 50))
        return JSONResponse({
            "id": f"resp_{uuid.uuid4().hex[:20]}", "object": "response.compaction",
            "created_at": 0, "output": [*kept, self._compaction_item(history)], "usage": usage,
        })  # fmt: skip

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
            return gemini_error(
                403,
                "Method doesn't allow unregistered callers (callers "
                "without established identity). Please use API Key or "
                "other form of API consumer identity to call this API.",
                "PERMISSION_DENIED",
            )
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
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": usage,
            "modelVersion": model,
            "responseId": uuid.uuid4().hex[:20],
        }
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


def responses_call(call: Call) -> dict[str, Any]:
    """``call`` as a Responses output item: a ``function_call`` with its arguments as JSON,
    or a freeform one as a ``custom_tool_call`` with its text as ``input``."""
    if call.freeform:
        kind, ident, given = "custom_tool_call", "ctc", {"input": call.arguments[FREEFORM]}
    else:
        kind, ident, given = "function_call", "fc", {"arguments": json.dumps(call.arguments)}
    return {
        "type": kind,
        "id": f"{ident}_{uuid.uuid4().hex[:20]}",
        "call_id": f"call_{uuid.uuid4().hex[:20]}",
        "name": call.name,
        **given,
        "status": "completed",
    }


def _sealed(seen: Any) -> str:
    """Opaque content standing for the history ``seen``: a digest of it and a nonce,
    encoded as the APIs' encrypted fields are."""
    digest = hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).digest()
    return "gAAAAA" + base64.urlsafe_b64encode(digest + os.urandom(160)).decode()


def _said(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content[:100]]
    return [b["text"][:100] for b in content or [] if isinstance(b, dict) and b.get("text")]


def live(fmt: str, history: Any) -> Any:
    """What of ``history`` the model reads: Anthropic drops every message before the last
    one holding a ``compaction`` block (the block stands for them)."""
    if fmt != "anthropic" or not isinstance(history, list):
        return history
    for i in range(len(history) - 1, -1, -1):
        content = history[i].get("content") if isinstance(history[i], dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "compaction" for b in content
        ):
            return history[i:]
    return history


def tokens_of(history: Any) -> int:
    """The stand-in's token count of a history (its JSON's characters / 4, as the
    prompt-too-long message says)."""
    return len(json.dumps(history, ensure_ascii=False)) // 4


def _compact_threshold(body: dict[str, Any]) -> int | None:
    """The ``compact_threshold`` of a Responses body's ``context_management`` (server-side
    compaction), if it asks for one."""
    entries = body.get("context_management")
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("type") == "compaction":
            threshold = entry.get("compact_threshold")
            return threshold if isinstance(threshold, int) else None
    return None


def _compact_edit(body: dict[str, Any]) -> dict[str, Any] | None:
    """The ``compact_20260112`` edit of an Anthropic body's ``context_management``."""
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, dict) else None
    return (
        next(
            (
                edit
                for edit in edits
                if isinstance(edit, dict) and edit.get("type") == "compact_20260112"
            ),
            None,
        )
        if isinstance(edits, list)
        else None
    )


def _setting_refusal(fmt: str, body: dict[str, Any]) -> str | None:
    """The compaction settings' bounds: a Responses ``compact_threshold`` of 1,000 tokens
    at least, an Anthropic ``compact_20260112`` trigger of 50,000."""
    if fmt == "responses":
        threshold = _compact_threshold(body)
        if threshold is not None and threshold < 1000:
            return (
                "Invalid 'context_management[0].compact_threshold': integer below minimum "
                f"value. Expected a value >= 1000, but got {threshold} instead."
            )
    if fmt == "anthropic":
        edit = _compact_edit(body)
        value = (edit.get("trigger") or {}).get("value") if edit is not None else None
        if isinstance(value, int) and value < 50_000:
            return (
                "context_management.edits.0.trigger.value: Input should be greater than or "
                "equal to 50000"
            )
    return None


def triggered(body: dict[str, Any]) -> bool:
    """Whether a Responses request asks for a compaction (its last input item is a
    ``compaction_trigger``: Codex CLI's remote compaction v2)."""
    given = body.get("input")
    return (
        isinstance(given, list)
        and bool(given)
        and isinstance(given[-1], dict)
        and (given[-1].get("type") == "compaction_trigger")
    )


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
    return JSONResponse(
        {"error": {"code": code, "message": message, "status": status}}, status_code=code
    )


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
        elif block["type"] == "compaction":  # the block empty, then its fields in one delta
            start_block = {**block, "content": None, "encrypted_content": None}
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": start_block},
                )
            )
            delta = {
                "type": "compaction_delta",
                "content": block["content"],
                "encrypted_content": block["encrypted_content"],
            }
            events.append(
                ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta})
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
                "usage": {
                    k: v
                    for k, v in message["usage"].items()
                    if k in ("output_tokens", "iterations")
                },
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return [(name, json.dumps(data)) for name, data in events]


def responses_events(response: dict[str, Any]) -> list[tuple[str, str]]:
    """Every event a Responses client waits for, in the API's order: the response created
    and in progress; per output item its ``added``, its content part, its arguments (a
    ``function_call``) or its input (a ``custom_tool_call``) as deltas, each ``done``; then
    ``response.completed`` (clients stall without them)."""
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
            events.append(
                {"type": "response.output_item.added", "output_index": i, "item": started}
            )
            where = {"output_index": i, "item_id": item["id"], "content_index": 0}
            events.append(
                {"type": "response.content_part.added", **where, "part": {**part, "text": ""}}
            )
            for piece in split(text):
                events.append(
                    {"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []}
                )
            events.append(
                {"type": "response.output_text.done", **where, "text": text, "logprobs": []}
            )
            events.append({"type": "response.content_part.done", **where, "part": part})
        elif item["type"] in ("function_call", "custom_tool_call"):
            given, kind = (
                ("arguments", "function_call_arguments")
                if item["type"] == "function_call"
                else ("input", "custom_tool_call_input")
            )
            started = {**item, "status": "in_progress", given: ""}
            events.append(
                {"type": "response.output_item.added", "output_index": i, "item": started}
            )
            where = {"output_index": i, "item_id": item["id"]}
            for piece in split(item[given]):
                events.append({"type": f"response.{kind}.delta", **where, "delta": piece})
            events.append({"type": f"response.{kind}.done", **where, given: item[given]})
        else:
            events.append({"type": "response.output_item.added", "output_index": i, "item": item})
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    events.append({"type": "response.completed", "response": response})
    return [(e["type"], json.dumps({**e, "sequence_number": n})) for n, e in enumerate(events)]
