"""Anthropic Messages: ``tool_use`` blocks in assistant messages, ``tool_result`` blocks in
the user message that follows."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from middleware.errors import HistoryError
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
    blank_name,
)
from middleware.formats.fields import (
    check_content,
    optional_id,
    result_content,
    string_field,
    tool_name,
    wire_content,
)
from middleware.formats.values import count_of, part_types
from middleware.view import Block, Node, Opaque, Role, ToolCall, ToolResult

#: Tool ids the Anthropic API accepts: this pattern, at most :data:`MAX_ID_LENGTH`
#: characters (ids replayed from other providers, such as ``call_1|fc_2``, break it).
ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")
MAX_ID_LENGTH = 64


def valid_id(value: object) -> bool:
    """Whether the Anthropic API accepts ``value`` as a ``tool_use`` id."""
    return isinstance(value, str) and len(value) <= MAX_ID_LENGTH and bool(ID_PATTERN.match(value))


_ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system"}


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
        return _violations(messages)

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
        role = _role(message, index)
        if "content" not in message:
            raise HistoryError("message has no 'content'", index=index)
        content = check_content(message["content"], index)
        if isinstance(content, str):
            blocks: tuple[Block, ...] = (
                (Opaque({"type": "text", "text": content}),) if content else ()
            )
            return Node(role, blocks, raw=message, origin=index)
        parsed: list[Block] = []
        for j, block in enumerate(content):
            kind = block.get("type")
            if not isinstance(kind, str):
                raise HistoryError(f"content block {j} has no 'type'", index=index)
            if kind == "tool_use":
                if role != "assistant":
                    raise HistoryError(
                        f"content block {j}: a tool_use block must be in an assistant message",
                        index=index,
                    )
                parsed.append(
                    ToolCall(
                        id=optional_id(
                            block.get("id"), index, f"content block {j} (tool_use) 'id'"
                        ),
                        name=tool_name(
                            block.get("name"), index, f"content block {j} (tool_use) 'name'"
                        ),
                        arguments=block.get("input", {}),
                        raw=block,
                    )
                )
            elif kind == "tool_result":
                if role != "user":
                    raise HistoryError(
                        f"content block {j}: a tool_result block must be in a user message",
                        index=index,
                    )
                is_error = block.get("is_error", False)
                if not isinstance(is_error, bool):
                    raise HistoryError(
                        f"content block {j} (tool_result) 'is_error' must be true or false",
                        index=index,
                    )
                parsed.append(
                    ToolResult(
                        call_id=optional_id(
                            block.get("tool_use_id"), index, f"content block {j} 'tool_use_id'"
                        ),
                        content=result_content(
                            block.get("content"), index, f"content block {j} (tool_result) content"
                        ),
                        is_error=is_error,
                        raw=block,
                    )
                )
            else:
                parsed.append(Opaque(block))
        return Node(role, tuple(parsed), raw=message, origin=index)

    def message_content(self, message: dict[str, Any]) -> str | list[Any] | None:
        content = message.get("content")
        return content if isinstance(content, (str, list)) else None

    def render_node(self, node: Node) -> Any:
        if len(node.blocks) == 1 and isinstance(node.blocks[0], ToolResult):
            only = node.blocks[0]
            if only.text_protocol:
                return {**(node.raw or {"role": node.role}), "content": wire_content(only.content)}
        content = [self._render_block(b) for b in node.blocks]
        if node.raw is None:
            return {"role": node.role, "content": content}
        text = node.raw.get("content")
        if isinstance(text, str) and content == ([{"type": "text", "text": text}] if text else []):
            return node.raw  # string content the edit left as it was
        return {**node.raw, "content": content}

    def _render_block(self, block: Block) -> Any:
        if isinstance(block, Opaque):
            return block.raw
        if isinstance(block, ToolCall):
            if block.raw is None:
                return {
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    "input": block.arguments,
                }
            raw_call = block.raw
            same_input = block.sealed or raw_call.get("input", {}) == block.arguments
            if raw_call.get("id") == block.id and raw_call.get("name") == block.name and same_input:
                return raw_call
            out_call = {**raw_call, "id": block.id, "name": block.name}
            if not same_input:
                out_call["input"] = block.arguments
            return out_call
        raw = block.raw
        if raw is None:
            out: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": block.call_id,
                "content": wire_content(block.content),
            }
            if block.is_error:
                out["is_error"] = True
            return out
        same_id = raw.get("tool_use_id") == block.call_id
        same_content = (
            block.sealed or result_content(raw.get("content"), 0, "content") == block.content
        )
        same_flag = bool(raw.get("is_error", False)) == block.is_error
        if same_id and same_content and same_flag:
            return raw
        out = dict(raw)
        if not same_id:
            out["tool_use_id"] = block.call_id
        if not same_content:
            out["content"] = wire_content(block.content)
        if not same_flag:
            if block.is_error:
                out["is_error"] = True
            else:
                out.pop("is_error", None)
        return out

    def user_message(self, text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    def result_node(self, results: Sequence[ToolResult]) -> Node:
        return Node("user", tuple(results))


def _role(message: dict[str, Any], index: int) -> Role:
    role = string_field(message, "role", index, "'role'")
    if role is None:
        raise HistoryError("message has no 'role'", index=index)
    if role not in _ROLES:
        raise HistoryError(
            f"unknown role {role!r} for Anthropic Messages (expected user or assistant)",
            index=index,
        )
    return _ROLES[role]


CODEC = AnthropicCodec()


# -- Anthropic's pairing rules, read from the wire messages (the repair's oracle) ----------


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict)]


def _violations(messages: Sequence[dict[str, Any]]) -> list[Violation]:
    out: list[Violation] = []
    seen_ids: set[str] = set()
    assistants: list[int] = []  # indices of the assistant messages so far
    for i, message in enumerate(messages):
        blocks = _blocks(message)
        if message.get("role") == "assistant":
            assistants.append(i)
            for k, block in enumerate(blocks):
                if block.get("type") != "tool_use":
                    continue
                if blank_name(block.get("name")):
                    out.append(
                        Violation(
                            i,
                            "empty_name",
                            f"messages.{i}.content.{k}.tool_use.name: String should have at "
                            "least 1 non-blank character",
                        )
                    )
                uid = block.get("id") or ""
                if not uid:
                    out.append(
                        Violation(
                            i, "empty_id", f"messages.{i}.content.{k}: `tool_use` id is empty"
                        )
                    )
                elif uid in seen_ids:
                    out.append(
                        Violation(
                            i,
                            "duplicate_id",
                            f"messages.{i}.content.{k}: `tool_use` ids must be unique",
                        )
                    )
                elif not valid_id(uid):
                    out.append(
                        Violation(
                            i,
                            "invalid_id",
                            f"messages.{i}.content.{k}.tool_use.id: String should match pattern "
                            f"'{ID_PATTERN.pattern}' (at most {MAX_ID_LENGTH} characters)",
                        )
                    )
                seen_ids.add(uid)
            out.extend(_answered(messages, i, blocks))
        else:
            # The latest assistant message before the one right before this message.
            older = [a for a in assistants[-2:] if a <= i - 2]
            out.extend(_results(messages, i, blocks, older[-1] if older else None))
    return sorted(out, key=lambda v: v.index)


def _answered(
    messages: Sequence[dict[str, Any]], i: int, blocks: list[dict[str, Any]]
) -> list[Violation]:
    wanted = [b.get("id") or "" for b in blocks if b.get("type") == "tool_use"]
    if not wanted:
        return []
    answered: set[str] = set()
    if i + 1 < len(messages) and messages[i + 1].get("role") == "user":
        for block in _blocks(messages[i + 1]):
            if block.get("type") == "tool_result":
                answered.add(block.get("tool_use_id") or "")
    missing = [w for w in wanted if not w or w not in answered]
    if not missing:
        return []
    return [
        Violation(
            i,
            "missing_result",
            f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
            f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
            "`tool_result` block in the next message.",
        )
    ]


def _results(
    messages: Sequence[dict[str, Any]], j: int, blocks: list[dict[str, Any]], older: int | None
) -> list[Violation]:
    """The results of message ``j``; ``older`` is the latest assistant message before
    message ``j - 1`` (a result answering it is displaced rather than orphaned)."""
    out: list[Violation] = []
    previous = messages[j - 1] if j > 0 else None
    calls: set[str] = set()
    if previous is not None and previous.get("role") == "assistant":
        calls = _tool_use_ids(previous)
    earlier = _tool_use_ids(messages[older]) if older is not None else set()
    seen: set[str] = set()
    other_before = False
    for k, block in enumerate(blocks):
        if block.get("type") != "tool_result":
            other_before = True
            continue
        where = f"messages.{j}.content.{k}"
        uid = block.get("tool_use_id") or ""
        if not uid:
            out.append(
                Violation(j, "empty_id", f"{where}: `tool_result` has an empty `tool_use_id`")
            )
        elif uid not in calls:
            code = "displaced_result" if uid in earlier else "orphan_result"
            out.append(
                Violation(
                    j,
                    code,
                    f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {uid}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the "
                    "previous message.",
                )
            )
        elif uid in seen:
            out.append(
                Violation(j, "duplicate_result", f"{where}: more than one `tool_result` for {uid}")
            )
        elif other_before:
            out.append(
                Violation(
                    j,
                    "result_not_first",
                    f"{where}: `tool_result` blocks must come first in the user message, "
                    "before any other content",
                )
            )
        seen.add(uid)
    return out


def _tool_use_ids(message: dict[str, Any]) -> set[str]:
    return {b.get("id") or "" for b in _blocks(message) if b.get("type") == "tool_use"}


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
