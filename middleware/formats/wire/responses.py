"""OpenAI Responses input items: calls (``function_call``, ``local_shell_call``, ...)
answered by their output items (paired by ``call_id``), messages, reasoning and other
items; which output answers which call is :mod:`.responses_items`' table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import middleware.formats.wire.responses_items as items
from middleware.errors import HistoryError
from middleware.formats.base import Codec
from middleware.formats.declarations import (
    AnswerCall,
    Provider,
    ResultPlacement,
    Route,
    ToolSpec,
    UsageCounts,
    Violation,
    blank_name,
    empty_name_reason,
)
from middleware.formats.fields import (
    check_content,
    optional_id,
    result_content,
    string_field,
    tool_name,
    wire_content,
)
from middleware.formats.values import arguments_json, arguments_of, part_types
from middleware.formats.wire.openai import OPENAI, cached_prompt_usage
from middleware.view import Node, Role, ToolCall, ToolResult

_MESSAGE_ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}


class ResponsesCodec(Codec):
    """Call and output items are read and written from the pair table of
    :mod:`.responses_items`. Structured outputs (shell chunks, a screenshot, found tools)
    carry their whole item (but the call id) as one opaque content part: no step reads
    text into them or writes text out of them, and a dropped one is reported whole."""

    name: ClassVar[str] = "responses"
    provider: ClassVar[Provider] = OPENAI
    #: ``/responses/compact`` (Codex CLI's remote compaction, the SDKs'
    #: ``responses.compact``) is a model call on the history: billed, and forwarded as it
    #: came (what it gives back replaces the history the provider summarised).
    proxy_routes: ClassVar[tuple[Route, ...]] = (
        Route("/v1/responses"),
        Route("/v1/responses/compact", cleaned=False),
    )
    client_routes: ClassVar[tuple[Route, ...]] = (
        Route("/responses"),
        Route("/responses/compact", cleaned=False),
    )

    history_key: ClassVar[str] = "input"
    stored_state_keys: ClassVar[tuple[str, ...]] = ("previous_response_id", "conversation")
    #: Content part types only Responses has.
    PARTS: ClassVar[frozenset[str]] = frozenset(
        {"input_text", "output_text", "input_image", "input_file"}
    )

    def signals(self, message: Mapping[str, Any]) -> list[tuple[str, bool]]:
        """Typed items, its content parts."""
        out: list[tuple[str, bool]] = []
        kind = message.get("type")
        if isinstance(kind, str):
            out.append((f"item of type {kind!r}", True))
        out += [(f"{part!r} content part", True) for part, _ in part_types(message)
                if part in self.PARTS]  # fmt: skip
        return out

    def violations(self, messages: Sequence[dict[str, Any]]) -> list[Violation]:
        """Every call item the client executes has an output of a type that answers it
        (:data:`.responses_items.PAIRS`) with its ``call_id`` after it and before the next
        model turn, and every output answers a call of the model turn before it, once;
        ``call_id`` values are non-empty and unique in a turn; a reasoning item is followed
        by the item it reasoned for."""
        return _violations(messages)

    def tool_definition(self, tool: ToolSpec) -> dict[str, Any]:
        return {"type": "function", "name": tool.name, "description": tool.description,
                "parameters": tool.parameters}  # fmt: skip

    def answer_calls(self, answer: Mapping[str, Any]) -> list[AnswerCall]:
        items = answer.get("output") or []
        return [AnswerCall(i["call_id"], i["name"], arguments_of(i.get("arguments")))
                for i in items if i.get("type") == "function_call"]  # fmt: skip

    def answer_without_calls(self, answer: Mapping[str, Any], name: str) -> dict[str, Any]:
        kept = [i for i in answer["output"]
                if not (i.get("type") == "function_call" and i.get("name") == name)]  # fmt: skip
        return {**answer, "output": kept}

    def continued(
        self, body: Mapping[str, Any], answer: Mapping[str, Any], results: list[tuple[str, str]]
    ) -> dict[str, Any]:
        """The answer's output items, then the outputs (a plain-text ``input`` becomes its
        user message first)."""
        given = body.get("input")
        history = given if isinstance(given, list) else [{"role": "user", "content": given}]
        return {**body, "input": [
            *history,
            *answer["output"],
            *({"type": "function_call_output", "call_id": call_id, "output": text}
              for call_id, text in results),
        ]}  # fmt: skip

    def usage_counts(self, usage: Mapping[str, Any]) -> UsageCounts | None:
        return cached_prompt_usage(usage, "input_tokens", "output_tokens", "input_tokens_details")

    def event_usage(self, event: Mapping[str, Any]) -> tuple[Any, Any] | None:
        """The response's last event: completed, incomplete or failed."""
        if event.get("type") not in ("response.completed", "response.incomplete",
                                     "response.failed"):  # fmt: skip
            return None
        response = event.get("response")
        if not isinstance(response, Mapping):
            return None
        return response.get("usage"), response.get("model")

    def event_id(self, event: Mapping[str, Any]) -> Any:
        """The last event holds the response, with its id."""
        response = event.get("response")
        return response.get("id") if isinstance(response, Mapping) else None

    result_placement: ClassVar[ResultPlacement] = ResultPlacement.AFTER_TURN
    duplicate_ids_within: ClassVar[Literal["message", "turn"]] = "turn"
    reasoning_items: ClassVar[bool] = True
    calls_are_items: ClassVar[bool] = True

    def parse_message(self, message: dict[str, Any], index: int) -> Node:
        kind = string_field(message, "type", index, "item 'type'")
        if kind is None and "role" in message:
            kind = "message"
        if kind is None:
            raise HistoryError("item has neither a 'type' nor a 'role'", index=index)
        if kind == "message":
            role = string_field(message, "role", index, "message item 'role'")
            if role is None or role not in _MESSAGE_ROLES:
                raise HistoryError(
                    f"unknown role {role!r} for a Responses message item "
                    "(expected user, assistant, system or developer)",
                    index=index,
                )
            if "content" not in message:
                raise HistoryError("message item has no 'content'", index=index)
            check_content(message["content"], index)
            return Node(_MESSAGE_ROLES[role], (), raw=message, origin=index)
        call_spec = items.call_item(message)
        if call_spec is not None:
            name = (
                tool_name(message.get(call_spec.name_key), index, f"{kind} 'name'")
                if call_spec.name_key is not None
                else call_spec.tool
            )
            call = ToolCall(
                id=optional_id(message.get("call_id"), index, "'call_id'"),
                name=name,
                arguments=message.get(call_spec.arguments_key),
                raw=message,
            )
            return Node("assistant", (call,), raw=message, origin=index)
        output_spec = items.output_item(message)
        if output_spec is not None:
            return Node(
                "tool", (_result(message, kind, output_spec, index),), raw=message, origin=index
            )
        if items.is_model_item(message):
            return Node("assistant", (), raw=message, origin=index)
        if kind.endswith("_output"):
            return Node("tool", (), raw=message, origin=index)
        return Node("user", (), raw=message, origin=index)

    def message_content(self, message: dict[str, Any]) -> str | list[Any] | None:
        content = message.get("content")
        return content if isinstance(content, (str, list)) else None

    def render_node(self, node: Node) -> Any:
        if (
            not node.blocks
            and isinstance(node.raw, dict)
            and items.call_item(node.raw) is None
            and items.output_item(node.raw) is None
        ):
            return node.raw  # an item that never held a tool block: nothing a step changed
        if node.role == "assistant":
            (call,) = node.calls
            if call.raw is None:
                return {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": arguments_json(call.arguments),
                }
            call_spec = items.call_item(call.raw) or items.CALLS["function_call"]
            out = {**call.raw, "call_id": call.id}
            if call_spec.name_key is not None:
                out[call_spec.name_key] = call.name
            if not call.sealed and call.raw.get(call_spec.arguments_key) != call.arguments:
                out[call_spec.arguments_key] = call.arguments
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
        raw = result.raw
        spec = items.output_item(raw) or items.OUTPUTS["function_call_output"]
        id_key = next((key for key in spec.id_keys if key in raw), spec.id_keys[0])
        out = {**raw, id_key: result.call_id}
        if spec.text_key is not None and not result.sealed:
            kind = items.item_type(raw)
            if _text_content(raw, kind, spec, 0) != result.content:
                out[spec.text_key] = wire_content(result.content)
        return out

    def user_message(self, text: str) -> dict[str, Any]:
        return {"type": "message", "role": "user", "content": text}

    def result_node(self, results: Sequence[ToolResult]) -> Node:
        (result,) = results
        return Node("tool", (result,))

    def answers(self, result: ToolResult, call: ToolCall) -> bool:
        output = items.item_type(result.raw) if result.raw is not None else "function_call_output"
        called = items.item_type(call.raw) if call.raw is not None else "function_call"
        return items.answers(output, called)

    def synthetic_result(self, call: ToolCall, text: str) -> ToolResult:
        called = items.item_type(call.raw) if call.raw is not None else "function_call"
        kind = items.synthetic_output(called)
        spec = items.OUTPUTS[kind]
        raw = spec.synthetic(call.id, text)
        return _result(raw, kind, spec, 0, is_error=True)


def _result(
    item: dict[str, Any],
    kind: str,
    spec: items.OutputItem,
    index: int,
    *,
    is_error: bool | None = None,
) -> ToolResult:
    """The view of an output item: text content, or the whole item as one opaque part."""
    content = _text_content(item, kind, spec, index)
    failed = spec.failed is not None and item.get(spec.failed[0]) == spec.failed[1]
    return ToolResult(
        call_id=optional_id(items.output_call_id(item, spec), index, "the output's call id"),
        content=content,
        is_error=failed if is_error is None else is_error,
        raw=item,
    )


def _text_content(
    item: dict[str, Any], kind: str, spec: items.OutputItem, index: int
) -> str | tuple[Any, ...]:
    if spec.text_key is None:  # the whole item but its call id (the result's call_id)
        return ({k: v for k, v in item.items() if k not in spec.id_keys},)
    return result_content(item.get(spec.text_key), index, f"{kind} '{spec.text_key}'")


CODEC = ResponsesCodec()


# -- Responses' pairing rules, read from the wire items (the repair's oracle) ---------------


def _violations(sent: Sequence[dict[str, Any]]) -> list[Violation]:
    out: list[Violation] = []
    # Pending calls of the current turn: call_id -> (index, call item type).
    pending: dict[str, tuple[int, str]] = {}
    answered: dict[str, str] = {}  # call_id -> call item type, answered in this turn
    older: set[str] = set()  # call ids of earlier turns, for "displaced"
    in_turn = False

    def close_turn() -> None:
        for uid, (index, kind) in pending.items():
            out.append(
                Violation(
                    index, "missing_result", f"No tool output found for {items.words(kind)} {uid}."
                )
            )
        older.update(pending, answered)

    for i, item in enumerate(sent):
        kind = items.item_type(item)
        if kind == "reasoning" and not (i + 1 < len(sent) and items.is_model_item(sent[i + 1])):
            out.append(
                Violation(
                    i,
                    "reasoning_without_item",
                    f"Item '{item.get('id', '')}' of type 'reasoning' was provided without its "
                    "required following item.",
                )
            )
        if items.is_model_item(item):
            if not in_turn:
                close_turn()
                pending, answered, in_turn = {}, {}, True
            spec = items.call_item(item)
            if spec is not None:
                if spec.name_key is not None and blank_name(item.get(spec.name_key)):
                    out.append(Violation(i, "empty_name", empty_name_reason(f"input[{i}]")))
                uid = item.get("call_id") or ""
                if not uid:
                    out.append(Violation(i, "empty_id", f"{kind} item has an empty call_id."))
                elif uid in pending or uid in answered:
                    out.append(
                        Violation(i, "duplicate_id", f"Duplicate call_id {uid} in one model turn.")
                    )
                else:
                    pending[uid] = (i, kind)
            continue
        in_turn = False
        output = items.output_item(item)
        if output is None:
            continue
        uid = items.output_call_id(item, output) or ""
        if uid in pending and items.answers(kind, pending[uid][1]):
            answered[uid] = pending.pop(uid)[1]
        elif uid and uid in answered and items.answers(kind, answered[uid]):
            out.append(Violation(i, "duplicate_result", f"More than one output for call_id {uid}."))
        else:
            code = "displaced_result" if uid and uid in older else "orphan_result"
            out.append(
                Violation(
                    i, code, f"No tool call found for {items.words(kind)} with call_id {uid}."
                )
            )
    close_turn()
    return sorted(out, key=lambda v: v.index)
