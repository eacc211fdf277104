"""Gemini contents read into nodes and written back: a content's ``functionCall`` and
``functionResponse`` parts are the view's calls and results (their view ids are
:mod:`.gemini_turns`'), every other part is kept as it came."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from middleware.errors import HistoryError
from middleware.formats.fields import optional_id, string_field, tool_name
from middleware.formats.wire.gemini_turns import view_id, wire_id
from middleware.view import Block, Node, Opaque, Role, ToolCall, ToolResult

_ROLES: dict[str, Role] = {"user": "user", "model": "assistant", "function": "user"}

#: The ``functionResponse.response`` key of a failure's text, by convention (Gemini CLI
#: writes ``{"error": ...}``; a success is ``{"output": ...}``).
_ERROR_KEY = "error"


def content_to_node(message: dict[str, Any], index: int) -> Node:
    """One wire content as a node: its ``functionCall`` and ``functionResponse`` parts
    read, the rest kept opaque."""
    role = string_field(message, "role", index, "'role'") or "user"
    if role not in _ROLES:
        raise HistoryError(
            f"unknown role {role!r} for Gemini contents (expected user or model)",
            index=index,
        )
    parts = message.get("parts")
    if not isinstance(parts, list):
        raise HistoryError(
            "a content needs 'parts', a list of parts"
            if parts is None
            else f"'parts' must be a list, got {type(parts).__name__}",
            index=index,
        )
    blocks: list[Block] = []
    for j, part in enumerate(parts):
        if not isinstance(part, dict):
            raise HistoryError(
                f"part {j} must be a JSON object, got {type(part).__name__}", index=index
            )
        if "functionCall" in part:
            if role != "model":
                raise HistoryError(
                    f"part {j}: a functionCall part must be in a model content", index=index
                )
            blocks.append(_call(part, j, index))
        elif "functionResponse" in part:
            if role == "model":
                raise HistoryError(
                    f"part {j}: a functionResponse part must be in a user content",
                    index=index,
                )
            blocks.append(_response(part, j, index))
        else:
            blocks.append(Opaque(part))
    return Node(_ROLES[role], tuple(blocks), raw=message, origin=index)


def node_to_content(node: Node) -> Any:
    """A changed or created node as a wire content, reusing every part a step left as it
    was."""
    if len(node.blocks) == 1 and isinstance(node.blocks[0], ToolResult):
        only = node.blocks[0]
        if only.text_protocol:  # read from text parts (message_content): written as one
            return {**(node.raw or {"role": "user"}), "parts": [{"text": only.text}]}
    parts = [_render_block(block) for block in node.blocks]
    if node.raw is None:
        return {"role": "model" if node.role == "assistant" else "user", "parts": parts}
    return {**node.raw, "parts": parts}


def _call(part: dict[str, Any], j: int, index: int) -> ToolCall:
    body = part["functionCall"]
    if not isinstance(body, dict):
        raise HistoryError(f"part {j}: 'functionCall' must be a JSON object", index=index)
    arguments = body.get("args", {})
    if not isinstance(arguments, dict):
        raise HistoryError(f"part {j}: 'functionCall.args' must be a JSON object", index=index)
    return ToolCall(
        id=view_id(optional_id(body.get("id"), index, f"part {j} functionCall.id")),
        name=tool_name(body.get("name"), index, f"part {j} functionCall.name"),
        arguments=arguments,
        raw=part,
    )


def _response(part: dict[str, Any], j: int, index: int) -> ToolResult:
    body = part["functionResponse"]
    if not isinstance(body, dict):
        raise HistoryError(f"part {j}: 'functionResponse' must be a JSON object", index=index)
    response = body.get("response", {})
    if not isinstance(response, dict):
        raise HistoryError(
            f"part {j}: 'functionResponse.response' must be a JSON object", index=index
        )
    key, text = read_response(response)
    return ToolResult(
        call_id=view_id(optional_id(body.get("id"), index, f"part {j} functionResponse.id")),
        content=text,
        is_error=key == _ERROR_KEY,
        raw=part,
        tool_name=tool_name(body.get("name"), index, f"part {j} functionResponse.name") or None,
    )


def read_response(response: Mapping[str, Any]) -> tuple[str | None, str]:
    """What the model reads of a response, and the key it is under: the only string value
    (``output``, ``error``), else (none or several) the whole response as JSON, key
    ``None``."""
    keys = [key for key, value in response.items() if isinstance(value, str)]
    if len(keys) == 1:
        text: str = response[keys[0]]
        return keys[0], text
    return None, json.dumps(response, ensure_ascii=False, separators=(",", ":"))


def _render_block(block: Block) -> Any:
    if isinstance(block, Opaque):
        return block.raw
    if isinstance(block, ToolCall):
        return _render_call(block)
    raw = block.raw
    if raw is None:
        response: dict[str, Any] = {
            "name": block.tool_name or "",
            "response": {_ERROR_KEY if block.is_error else "output": block.content},
        }
        if (real_id := wire_id(block.call_id)) is not None:
            response = {"id": real_id, **response}
        return {"functionResponse": response}
    body = raw["functionResponse"]
    before = body.get("response", {})
    if block.sealed:
        return raw
    key, text = read_response(before)
    if text == block.content:
        return raw
    after = {**before, key: block.content} if key is not None else {"output": block.content}
    return {**raw, "functionResponse": {**body, "response": after}}


def _render_call(call: ToolCall) -> Any:
    """A call as it came unless a step changed it; a view id made by position is never
    written."""
    real_id = wire_id(call.id)
    if call.raw is None:
        made: dict[str, Any] = {"name": call.name, "args": call.arguments}
        return {"functionCall": {"id": real_id, **made} if real_id else made}
    body = call.raw["functionCall"]
    same_args = call.sealed or body.get("args", {}) == call.arguments
    if (body.get("id") or None) == real_id and body.get("name") == call.name and same_args:
        return call.raw
    out = {**body, "name": call.name}
    if not same_args:
        out["args"] = call.arguments
    if real_id is not None:
        out["id"] = real_id
    else:
        out.pop("id", None)
    return {**call.raw, "functionCall": out}
