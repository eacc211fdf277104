"""Anthropic Messages: ``tool_use`` blocks in assistant messages, ``tool_result`` blocks in
the user message that follows."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from middleware.formats.base import Codec
from middleware.formats.declarations import (
    AnswerCall,
    ErrorKind,
    Provider,
    ResultPlacement,
    Route,
    ToolSpec,
    UsageCounts,
    Violation,
)
from middleware.formats.values import count_of, part_types
from middleware.formats.wire.anthropic_messages import message_to_node, node_to_message
from middleware.formats.wire.anthropic_rules import ID_PATTERN, valid_id, violations
from middleware.view import Node, ToolResult


class AnthropicAPI(Provider):
    """Anthropic's Messages API."""

    name: ClassVar[str] = "anthropic"
    default_upstream: ClassVar[str] = "https://api.anthropic.com"
    #: Claude Code and the SDKs call ``/v1/...`` on ANTHROPIC_BASE_URL (Claude Code's
    #: ``/api/...`` calls go to its own OAuth base, never there).
    api_prefixes: ClassVar[tuple[str, ...]] = ("/v1/",)
    #: The proxy's situations -> Anthropic's error types.
    ERROR_TYPES: ClassVar[dict[str, str]] = {
        "too_large": "request_too_large",
        "not_processed": "api_error",
        "upstream_unreachable": "api_error",
        "not_found": "not_found_error",
        "forbidden": "permission_error",
        "request_timeout": "timeout_error",
        "overloaded": "overloaded_error",
        "bad_request": "invalid_request_error",
        "not_json": "invalid_request_error",
    }

    def error_document(self, kind: ErrorKind, message: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": self.ERROR_TYPES[kind], "message": message}}

    def claims(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        """Its version or key header, or Claude Code's user agent."""
        agent = headers.get("user-agent", "").lower()
        return (
            "anthropic-version" in headers or "x-api-key" in headers or agent.startswith("claude")
        )


ANTHROPIC = AnthropicAPI()


class AnthropicCodec(Codec):
    name: ClassVar[str] = "anthropic"
    provider: ClassVar[Provider] = ANTHROPIC
    proxy_routes: ClassVar[tuple[Route, ...]] = (
        Route("/v1/messages"),
        Route("/v1/messages/count_tokens", billed=False),
    )
    client_routes: ClassVar[tuple[Route, ...]] = (
        Route("/messages/count_tokens", billed=False),
        Route("/messages"),
        Route("/invoke"),  # Bedrock
        Route("/invoke-with-response-stream"),
        Route(":rawPredict"),  # Vertex
        Route(":streamRawPredict"),
    )
    results_share_message: ClassVar[bool] = True
    unique_call_ids: ClassVar[bool] = True
    has_error_flag: ClassVar[bool] = True
    empty_result_needs_text: ClassVar[bool] = True
    result_placement: ClassVar[ResultPlacement] = ResultPlacement.NEXT_MESSAGE
    call_id_pattern: ClassVar[re.Pattern[str] | None] = ID_PATTERN
    call_id_rule: ClassVar[str] = (
        "Anthropic tool_use ids must match ^[a-zA-Z0-9_-]+$ (64 characters at most)"
    )

    def accepts_call_id(self, call_id: str) -> bool:
        return valid_id(call_id)

    #: Content block types only Anthropic Messages has.
    BLOCKS: ClassVar[frozenset[str]] = frozenset(
        {
            "tool_use",
            "tool_result",
            "thinking",
            "redacted_thinking",
            "server_tool_use",
            "web_search_tool_result",
            "document",
            "search_result",
            "mcp_tool_use",
            "mcp_tool_result",
        }
    )

    def signals(self, message: Mapping[str, Any]) -> list[tuple[str, bool]]:
        """Its content blocks (an ``image`` with a ``source``)."""
        return [
            (f"{kind!r} content block", True)
            for kind, part in part_types(message)
            if kind in self.BLOCKS or (kind == "image" and "source" in part)
        ]

    def violations(self, messages: Sequence[dict[str, Any]]) -> list[Violation]:
        """Every ``tool_use`` is answered by a ``tool_result`` in the very next message, a
        user message whose ``tool_result`` blocks come first; every ``tool_result`` answers
        a ``tool_use`` of the message right before it, once; ``tool_use`` ids are non-empty,
        valid and unique across the request."""
        return violations(messages)

    def tool_definition(self, tool: ToolSpec) -> dict[str, Any]:
        return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}

    def answer_calls(self, answer: Mapping[str, Any]) -> list[AnswerCall]:
        return [
            AnswerCall(b["id"], b["name"], b.get("input") or {})
            for b in answer.get("content") or []
            if b.get("type") == "tool_use"
        ]

    def answer_without_calls(self, answer: Mapping[str, Any], name: str) -> dict[str, Any]:
        kept = [
            b
            for b in answer["content"]
            if not (b.get("type") == "tool_use" and b.get("name") == name)
        ]
        return {**answer, "content": kept}

    def continued(
        self, body: Mapping[str, Any], answer: Mapping[str, Any], results: list[tuple[str, str]]
    ) -> dict[str, Any]:
        return {
            **body,
            "messages": [
                *body["messages"],
                {"role": "assistant", "content": answer["content"]},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": call_id, "content": text}
                        for call_id, text in results
                    ],
                },
            ],
        }

    def usage_counts(self, usage: Mapping[str, Any]) -> UsageCounts | None:
        """Cache writes split by lifetime (``cache_creation.ephemeral_1h_input_tokens``:
        the 1-hour ones, the rest 5-minute); with the ``compaction`` entries of
        ``iterations`` added (a ``compact_20260112`` edit's own sampling, which the
        top-level fields leave out)."""
        counts = _usage_counts(usage)
        iterations = usage.get("iterations")
        for entry in iterations if isinstance(iterations, list) else ():
            if isinstance(entry, Mapping) and entry.get("type") == "compaction":
                counts = UsageCounts(*map(sum, zip(counts, _usage_counts(entry), strict=True)))
        return counts

    def event_usage(self, event: Mapping[str, Any]) -> tuple[Any, Any] | None:
        """``message_start`` (the input and cache fields, in its message) and
        ``message_delta`` (the output)."""
        kind = event.get("type")
        if kind not in ("message_start", "message_delta"):
            return None
        message = event.get("message") if kind == "message_start" else event
        if not isinstance(message, Mapping):
            return None
        return message.get("usage"), message.get("model")

    def event_id(self, event: Mapping[str, Any]) -> Any:
        """``message_start`` names its message."""
        message = event.get("message")
        return message.get("id") if isinstance(message, Mapping) else None

    generated_id_prefix: ClassVar[str] = "toolu_mw_"
    cache_writes_billed: ClassVar[bool] = True

    def parse_message(self, message: dict[str, Any], index: int) -> Node:
        return message_to_node(message, index)

    def render_node(self, node: Node) -> Any:
        return node_to_message(node)

    def message_content(self, message: dict[str, Any]) -> str | list[Any] | None:
        content = message.get("content")
        return content if isinstance(content, (str, list)) else None

    def user_message(self, text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    def result_node(self, results: Sequence[ToolResult]) -> Node:
        return Node("user", tuple(results))


CODEC = AnthropicCodec()


def _usage_counts(usage: Mapping[str, Any]) -> UsageCounts:
    """The tokens of one ``usage`` object, or of one of its ``iterations``."""
    written = count_of(usage, "cache_creation_input_tokens")
    split = usage.get("cache_creation")
    hour = min(
        count_of(split, "ephemeral_1h_input_tokens") if isinstance(split, Mapping) else 0,
        written,
    )
    return UsageCounts(
        input=count_of(usage, "input_tokens"),
        cache_read=count_of(usage, "cache_read_input_tokens"),
        cache_write_5m=written - hour,
        cache_write_1h=hour,
        output=count_of(usage, "output_tokens"),
    )
