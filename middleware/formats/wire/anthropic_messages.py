"""Anthropic Messages read into nodes and written back: a message's ``tool_use`` and
``tool_result`` blocks are the view's calls and results, every other block is kept as it
came."""

from __future__ import annotations

from typing import Any

from middleware.errors import HistoryError
from middleware.formats.fields import (
    check_content,
    optional_id,
    result_content,
    string_field,
    tool_name,
    wire_content,
)
from middleware.view import Block, Node, Opaque, Role, ToolCall, ToolResult

_ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system"}


def message_to_node(message: dict[str, Any], index: int) -> Node:
    """One wire message as a node: its ``tool_use`` and ``tool_result`` blocks read, the
    rest kept opaque."""
    role = _role(message, index)
    if "content" not in message:
        raise HistoryError("message has no 'content'", index=index)
    content = check_content(message["content"], index)
    if isinstance(content, str):
        blocks: tuple[Block, ...] = (Opaque({"type": "text", "text": content}),) if content else ()
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
                    id=optional_id(block.get("id"), index, f"content block {j} (tool_use) 'id'"),
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


def node_to_message(node: Node) -> Any:
    """A changed or created node as a wire message, reusing every block a step left as
    it was."""
    if len(node.blocks) == 1 and isinstance(node.blocks[0], ToolResult):
        only = node.blocks[0]
        if only.text_protocol:
            return {**(node.raw or {"role": node.role}), "content": wire_content(only.content)}
    content = [_block_to_wire(b) for b in node.blocks]
    if node.raw is None:
        return {"role": node.role, "content": content}
    text = node.raw.get("content")
    if isinstance(text, str) and content == ([{"type": "text", "text": text}] if text else []):
        return node.raw  # string content the edit left as it was
    return {**node.raw, "content": content}


def _block_to_wire(block: Block) -> Any:
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
    same_content = block.sealed or result_content(raw.get("content"), 0, "content") == block.content
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
