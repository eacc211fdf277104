"""Hidden references: the information-retention signal of a replay.

Cost alone rewards deleting everything. In a recorded session, the model's answer to a
request (its text and tool-call arguments) shows what it actually used. A distinctive token
of that answer (an identifier, a path, a version, an error code; not a plain word) whose
first appearance in the conversation was inside a tool result is a *reference*; it is
*hidden* when the processed request no longer contains it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from middleware.steps.mentions import distinctive_tokens
from middleware.view import Conversation, ToolCall, ToolResult


@dataclass(frozen=True)
class ReferenceIndex:
    """Where each distinctive token of a transcript first appeared."""

    #: token -> index of the first message whose tool-result text holds it
    first_in_result: Mapping[str, int]
    #: token -> index of the first message holding it outside tool results
    first_elsewhere: Mapping[str, int]
    #: token -> (message, block) of the first tool result holding it: where a model that
    #: finds the token hidden reads it back from
    source: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    def references(self, answer_tokens: Iterable[str], request_length: int) -> set[str]:
        """The answer's tokens that first appeared in a tool result of the request."""
        refs = set()
        for token in answer_tokens:
            where = self.first_in_result.get(token)
            if where is None or where >= request_length:
                continue
            if self.first_elsewhere.get(token, request_length) > where:
                refs.add(token)
        return refs


def build_index(conversation: Conversation) -> ReferenceIndex:
    """Index a whole transcript's conversation (parsed with its text-protocol rule)."""
    in_result: dict[str, int] = {}
    elsewhere: dict[str, int] = {}
    source: dict[str, tuple[int, int]] = {}
    for i, node in enumerate(conversation.nodes):
        for token in distinctive_tokens(" ".join(r.text for r in node.results)):
            in_result.setdefault(token, i)
        for j, block in enumerate(node.blocks):
            if isinstance(block, ToolResult):
                for token in distinctive_tokens(block.text):
                    source.setdefault(token, (i, j))
        for token in distinctive_tokens(" ".join(other_strings(node.raw, node.results))):
            elsewhere.setdefault(token, i)
    return ReferenceIndex(in_result, elsewhere, source)


def answer_tokens(conversation: Conversation, start: int) -> set[str]:
    """Distinctive tokens of the assistant turn starting at node ``start``: its text and
    tool-call arguments (not its thinking)."""
    tokens: set[str] = set()
    for node in conversation.nodes[start:]:
        if node.role != "assistant":
            break
        texts = [_call_arguments(b) for b in node.blocks if isinstance(b, ToolCall)]
        texts.extend(answer_texts(node.raw))
        tokens |= distinctive_tokens(" ".join(texts))
    return tokens


def is_hidden(token: str, serialized_request: str) -> bool:
    """Whether the serialised (JSON) request lacks ``token``, escaped or not."""
    if token in serialized_request:
        return False
    # As JSON writes it: ASCII-escaped, or not (a request serialised with
    # ensure_ascii=False keeps "é" but still escapes '"' and '\\').
    escaped = json.dumps(token)[1:-1]
    return escaped not in serialized_request and (
        json.dumps(token, ensure_ascii=False)[1:-1] not in serialized_request
    )


def _call_arguments(call: ToolCall) -> str:
    args = call.arguments
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def answer_texts(raw: Any) -> list[str]:
    if not isinstance(raw, dict):
        return []
    content = raw.get("content")
    if isinstance(content, str):
        return [content]
    texts = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("type") in ("text", "output_text"):
            texts.append(str(part.get("text", "")))
    return texts


def other_strings(raw: Any, results: tuple[Any, ...]) -> list[str]:
    """Every string of a message except its tool results' content."""
    if raw is None or (results and all(r.raw is raw for r in results)):
        return []
    result_raws = {id(r.raw) for r in results}
    if results and any(r.text_protocol for r in results):
        return []
    out: list[str] = []

    def walk(value: Any) -> None:
        if id(value) in result_raws:
            return
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(raw)
    return out
