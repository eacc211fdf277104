"""OpenAI Chat Completions: assistant ``tool_calls``, answered by ``role: tool`` messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from middleware.errors import HistoryError
from middleware.formats.base import Codec
from middleware.formats.declarations import (
    AnswerCall,
    ErrorKind,
    Provider,
    Route,
    ToolSpec,
    UsageCounts,
    Violation,
)
from middleware.formats.fields import (
    check_content,
    optional_id,
    result_content,
    string_field,
    tool_name,
    wire_content,
)
from middleware.formats.values import arguments_json, arguments_of, count_of, part_types, string_of
from middleware.formats.wire.openai_rules import violations
from middleware.view import Block, Node, Role, ToolCall, ToolResult

_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    # The deprecated single-function protocol: no ids, nothing to pair; kept as it is.
    "function": "tool",
}


class OpenAIAPI(Provider):
    """OpenAI's API (Chat Completions and Responses)."""

    name: ClassVar[str] = "openai"
    default_upstream: ClassVar[str] = "https://api.openai.com"
    #: The SDKs, Codex CLI and opencode take a base URL ending in ``/v1``.
    api_prefixes: ClassVar[tuple[str, ...]] = ("/v1/",)
    #: The proxy's situations -> OpenAI's error type and code.
    ERRORS: ClassVar[dict[str, tuple[str, str]]] = {
        "too_large": ("invalid_request_error", "request_too_large"),
        "not_processed": ("server_error", "chatcli_middleware_error"),
        "upstream_unreachable": ("server_error", "upstream_unreachable"),
        "not_found": ("invalid_request_error", "not_found"),
        "forbidden": ("invalid_request_error", "forbidden"),
        "request_timeout": ("invalid_request_error", "request_timeout"),
        "overloaded": ("server_error", "overloaded"),
        "bad_request": ("invalid_request_error", "invalid_path"),
        "not_json": ("invalid_request_error", "unsupported_content_type"),
    }

    def error_document(self, kind: ErrorKind, message: str) -> dict[str, Any]:
        kind_type, code = self.ERRORS[kind]
        return {"error": {"message": message, "type": kind_type, "param": None, "code": code}}

    def claims(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        """A bearer token."""
        return headers.get("authorization", "").lower().startswith("bearer ")


OPENAI = OpenAIAPI()


def cached_prompt_usage(
    usage: Mapping[str, Any], prompt_key: str, output_key: str, details_key: str
) -> UsageCounts | None:
    """OpenAI's usage: the prompt's tokens, of which ``<details>.cached_tokens`` were read
    from the cache (writes are not billed apart)."""
    if prompt_key not in usage:
        return None
    prompt = count_of(usage, prompt_key)
    details = usage.get(details_key)
    cached = min(count_of(details, "cached_tokens"), prompt) if isinstance(details, Mapping) else 0
    return UsageCounts(input=prompt - cached, cache_read=cached, output=count_of(usage, output_key))


class OpenAIChatCodec(Codec):
    name: ClassVar[str] = "openai"
    provider: ClassVar[Provider] = OPENAI
    #: Legacy completions and embeddings hold no history, and report their ``usage`` in
    #: Chat Completions' shape: billed, forwarded as they came.
    proxy_routes: ClassVar[tuple[Route, ...]] = (
        Route("/v1/chat/completions"),
        Route("/v1/completions", cleaned=False),
        Route("/v1/embeddings", cleaned=False),
    )
    client_routes: ClassVar[tuple[Route, ...]] = (  # and Azure's
        Route("/chat/completions"),
        Route("/completions", cleaned=False),
        Route("/embeddings", cleaned=False),
    )

    reads_plain_history: ClassVar[bool] = True
    #: Roles only OpenAI's formats have; ``developer`` Responses has too (weak evidence).
    ROLES: ClassVar[frozenset[str]] = frozenset({"tool", "developer", "function"})
    SHARED_ROLES: ClassVar[frozenset[str]] = frozenset({"developer"})
    #: Content part types only Chat Completions has.
    PARTS: ClassVar[frozenset[str]] = frozenset({"image_url", "input_audio", "refusal"})

    def signals(self, message: Mapping[str, Any]) -> list[tuple[str, bool]]:
        """Its roles, ``tool_calls``, its content parts."""
        out: list[tuple[str, bool]] = []
        role = string_of(message.get("role"))
        if role in self.ROLES:
            out.append((f"role {role!r}", role not in self.SHARED_ROLES))
        if "tool_calls" in message:
            out.append(("'tool_calls' field", True))
        out += [
            (f"{kind!r} content part", True)
            for kind, _ in part_types(message)
            if kind in self.PARTS
        ]
        return out

    def violations(self, messages: Sequence[dict[str, Any]]) -> list[Violation]:
        """An assistant message with ``tool_calls`` is followed by ``tool`` messages
        answering every call id (ids non-empty and unique in the message), each once; a
        ``tool`` message must belong to such a run."""
        return violations(messages)

    def tool_definition(self, tool: ToolSpec) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }

    def answer_calls(self, answer: Mapping[str, Any]) -> list[AnswerCall]:
        """The first choice's calls."""
        choices = answer.get("choices") or [{}]
        message = choices[0].get("message") or {}
        return [
            AnswerCall(c["id"], c["function"]["name"], arguments_of(c["function"].get("arguments")))
            for c in message.get("tool_calls") or []
        ]

    def answer_without_calls(self, answer: Mapping[str, Any], name: str) -> dict[str, Any]:
        choice = dict(answer["choices"][0])
        message = dict(choice["message"])
        kept = [c for c in message.get("tool_calls") or [] if c["function"]["name"] != name]
        message["tool_calls"] = kept or None
        choice["message"] = message
        return {**answer, "choices": [choice, *answer["choices"][1:]]}

    def continued(
        self, body: Mapping[str, Any], answer: Mapping[str, Any], results: list[tuple[str, str]]
    ) -> dict[str, Any]:
        message = dict(answer["choices"][0]["message"])
        return {
            **body,
            "messages": [
                *body["messages"],
                {k: v for k, v in message.items() if v is not None or k == "content"},
                *(
                    {"role": "tool", "tool_call_id": call_id, "content": text}
                    for call_id, text in results
                ),
            ],
        }

    def usage_counts(self, usage: Mapping[str, Any]) -> UsageCounts | None:
        return cached_prompt_usage(
            usage, "prompt_tokens", "completion_tokens", "prompt_tokens_details"
        )

    def event_usage(self, event: Mapping[str, Any]) -> tuple[Any, Any] | None:
        """The final chunk (with ``stream_options.include_usage``)."""
        return (event.get("usage"), event.get("model")) if "choices" in event else None

    def event_id(self, event: Mapping[str, Any]) -> Any:
        """Every chunk names its completion."""
        return event.get("id")

    def parse_message(self, message: dict[str, Any], index: int) -> Node:
        role = string_field(message, "role", index, "'role'")
        if role is None:
            raise HistoryError("message has no 'role'", index=index)
        if role not in _ROLES:
            raise HistoryError(
                f"unknown role {role!r} for OpenAI Chat Completions "
                "(expected system, developer, user, assistant or tool)",
                index=index,
            )
        content = message.get("content")
        if content is not None:
            check_content(content, index)
        if role == "assistant":
            return Node("assistant", _parse_calls(message, index), raw=message, origin=index)
        if role == "tool":
            result = ToolResult(
                call_id=optional_id(message.get("tool_call_id"), index, "'tool_call_id'"),
                content=result_content(content, index, "content"),
                raw=message,
            )
            return Node("tool", (result,), raw=message, origin=index)
        if role == "function":
            return Node("tool", (), raw=message, origin=index)
        return Node(_ROLES[role], (), raw=message, origin=index)

    def message_content(self, message: dict[str, Any]) -> str | list[Any] | None:
        content = message.get("content")
        return content if isinstance(content, (str, list)) else None

    def render_node(self, node: Node) -> Any:
        if node.role == "assistant":
            calls = [_render_call(c) for c in node.calls]
            out = dict(node.raw) if node.raw is not None else {"role": "assistant"}
            if calls:
                out["tool_calls"] = calls
            else:
                had_calls = out.pop("tool_calls", None) is not None
                # An assistant message needs content when it has no tool calls (a message
                # that never had any may be a refusal, whose content stays null).
                if (had_calls or node.raw is None) and out.get("content") is None:
                    out["content"] = ""
            return out
        if not node.results and node.raw is not None and node.raw.get("role") != "tool":
            return node.raw  # system, user or function message: nothing a step could change
        result = node.results[0]
        if result.text_protocol:
            return {**(node.raw or {"role": node.role}), "content": wire_content(result.content)}
        if node.raw is None:
            return {
                "role": "tool",
                "tool_call_id": result.call_id,
                "content": wire_content(result.content),
            }
        out = dict(node.raw)
        out["tool_call_id"] = result.call_id
        if not result.sealed and result_content(node.raw.get("content"), 0, "content") != (
            result.content
        ):
            out["content"] = wire_content(result.content)
        return out

    def is_empty(self, node: Node) -> bool:
        # Text, a refusal or audio live outside the blocks, in the raw message.
        raw = node.raw or {}
        return not node.blocks and not any(raw.get(k) for k in ("content", "refusal", "audio"))

    def user_message(self, text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    def result_node(self, results: Sequence[ToolResult]) -> Node:
        (result,) = results
        return Node("tool", (result,))


def _parse_calls(message: dict[str, Any], index: int) -> tuple[Block, ...]:
    tool_calls = message.get("tool_calls")
    if tool_calls is None:
        return ()
    if not isinstance(tool_calls, list):
        raise HistoryError(
            f"'tool_calls' must be a list, got {type(tool_calls).__name__}", index=index
        )
    calls: list[Block] = []
    for j, call in enumerate(tool_calls):
        if not isinstance(call, dict):
            raise HistoryError(f"tool_calls[{j}] must be a JSON object", index=index)
        kind = string_field(call, "type", index, f"tool_calls[{j}].type") or "function"
        body = call.get(kind) if kind in ("function", "custom") else None
        if not isinstance(body, dict):
            raise HistoryError(
                f"tool_calls[{j}] has no {kind!r} object with the tool's name", index=index
            )
        arguments = body.get("arguments") if kind == "function" else body.get("input")
        calls.append(
            ToolCall(
                id=optional_id(call.get("id"), index, f"tool_calls[{j}].id"),
                name=tool_name(body.get("name"), index, f"tool_calls[{j}].{kind}.name"),
                arguments=arguments,
                raw=call,
            )
        )
    return tuple(calls)


def _render_call(call: ToolCall) -> Any:
    if call.raw is None:
        return {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": arguments_json(call.arguments)},
        }
    raw = call.raw
    kind = raw.get("type", "function")
    body = raw[kind]
    key = "arguments" if kind == "function" else "input"
    same_body = body.get("name") == call.name and (call.sealed or body.get(key) == call.arguments)
    if raw.get("id") == call.id and same_body:
        return raw
    out = {**raw, "id": call.id}
    if not same_body:
        out[kind] = {**body, "name": call.name}
        if not call.sealed:
            out[kind][key] = call.arguments
    return out


CODEC = OpenAIChatCodec()
