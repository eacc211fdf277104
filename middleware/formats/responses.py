"""OpenAI Responses input items: ``function_call`` answered by ``function_call_output``
(paired by ``call_id``), messages, reasoning and other items."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from middleware.errors import HistoryError
from middleware.formats.base import (
    Codec,
    arguments_json,
    check_content,
    optional_id,
    required_name,
    result_content,
    string_field,
    wire_content,
)
from middleware.view import Node, Role, ToolCall, ToolResult

_MESSAGE_ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}
#: Call items and the key that holds their arguments.
_CALLS = {"function_call": "arguments", "custom_tool_call": "input"}
#: Output items and the call item type they answer.
_OUTPUTS = {"function_call_output": "function_call", "custom_tool_call_output": "custom_tool_call"}
_PAIRED = frozenset({*_CALLS, *_OUTPUTS})
#: Items the model produces that take part in no pairing this package repairs.
_ASSISTANT_ITEMS = frozenset({"reasoning", "compaction"})


class ResponsesCodec(Codec):
    name: ClassVar[str] = "responses"

    def parse_message(self, message: dict[str, Any], index: int) -> Node:
        kind = string_field(message, "type", index, "item 'type'")
        if kind is None and "role" in message:
            kind = "message"
        if kind is None:
            raise HistoryError("item has neither a 'type' nor a 'role'", index=index)
        if kind == "message":
            role = string_field(message, "role", index, "message item 'role'")
            if role not in _MESSAGE_ROLES:
                raise HistoryError(
                    f"unknown role {role!r} for a Responses message item "
                    "(expected user, assistant, system or developer)",
                    index=index,
                )
            if "content" not in message:
                raise HistoryError("message item has no 'content'", index=index)
            check_content(message["content"], index)
            return Node(_MESSAGE_ROLES[role], (), raw=message, origin=index)
        if kind in _CALLS:
            call = ToolCall(
                id=optional_id(message.get("call_id"), index, "'call_id'"),
                name=required_name(message.get("name"), index, f"{kind} 'name'"),
                arguments=message.get(_CALLS[kind]),
                raw=message,
            )
            return Node("assistant", (call,), raw=message, origin=index)
        if kind in _OUTPUTS:
            result = ToolResult(
                call_id=optional_id(message.get("call_id"), index, "'call_id'"),
                content=result_content(message.get("output"), index, f"{kind} 'output'"),
                raw=message,
            )
            return Node("tool", (result,), raw=message, origin=index)
        if kind in _ASSISTANT_ITEMS or kind.endswith("_call"):
            return Node("assistant", (), raw=message, origin=index)
        if kind.endswith("_output"):
            return Node("tool", (), raw=message, origin=index)
        return Node("user", (), raw=message, origin=index)

    def message_content(self, message: dict[str, Any]) -> str | list[Any] | None:
        content = message.get("content")
        return content if isinstance(content, (str, list)) else None

    def render_node(self, node: Node) -> Any:
        if not node.blocks and node.raw is not None and node.raw.get("type") not in _PAIRED:
            return node.raw  # an item without tool blocks: nothing a step could change
        if node.role == "assistant":
            (call,) = node.calls
            if call.raw is None:
                return {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": arguments_json(call.arguments),
                }
            out = {**call.raw, "call_id": call.id, "name": call.name}
            key = _CALLS.get(call.raw.get("type"), "arguments")
            if call.raw.get(key) != call.arguments:
                out[key] = call.arguments
            return out
        (result,) = node.results
        if result.text_protocol:
            return {**(node.raw or {"role": node.role}), "content": wire_content(result.content)}
        if result.raw is None:
            return {
                "type": "function_call_output",
                "call_id": result.call_id,
                "output": wire_content(result.content),
            }
        out = {**result.raw, "call_id": result.call_id}
        if result_content(result.raw.get("output"), 0, "output") != result.content:
            out["output"] = wire_content(result.content)
        return out

    def result_node(self, results: Sequence[ToolResult]) -> Node:
        (result,) = results
        return Node("tool", (result,))
