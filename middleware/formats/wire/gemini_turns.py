"""Gemini's turns: which response answers which call (by id, else by name and position
within the turn, never against an id either carries), and the rules Gemini's API holds a
history to, read from the wire contents with none of the repair's code
(:meth:`.GeminiCodec.violations`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from middleware.formats.declarations import Violation, blank_name
from middleware.view import Block, Node, ToolCall, ToolResult

#: How the view ids of calls without one begin (``gemini-position:3:1``: the turn's first
#: content, the call's place among the turn's calls).
POSITION_PREFIX = "gemini-position:"
#: What a wire id beginning like a view id made here is prefixed with in the view, so that
#: no id a client or the model writes is taken for a call's place (and then dropped from
#: the model's content, or paired with the call at that place).
ESCAPE_PREFIX = "gemini-id:"


def view_id(wire: str) -> str:
    """The view id of an id read from the wire (escaped if it begins like one made here)."""
    return ESCAPE_PREFIX + wire if wire.startswith((POSITION_PREFIX, ESCAPE_PREFIX)) else wire


def link(nodes: list[Node]) -> list[Node]:
    """``nodes`` with the view ids that pair each response with the call it answers: a
    call without an id takes one made of its turn and its place in it; a response takes its
    call's id, found by id, else by name and position within the turn, where an id is
    never overridden: a response carrying an id answers by name only when no call of its
    turn carries one (Gemini CLI's own ids for the Developer API's id-less calls), and a
    response without one answers a call of its name whatever id that call has. A response
    left over keeps its own id, or none: an orphan. Returns ``nodes`` itself when no id
    changes (every call and response carrying matching ids)."""
    out: list[Node] | None = None
    i = 0
    while i < len(nodes):
        if nodes[i].role != "assistant":
            i += 1
            continue
        turn = i
        while i < len(nodes) and nodes[i].role == "assistant":
            i += 1
        tail_end = i
        while tail_end < len(nodes) and nodes[tail_end].role != "assistant":
            tail_end += 1
        changed = _link_turn(nodes, turn, i, tail_end)
        if changed:
            out = out if out is not None else list(nodes)
            for index, node in changed.items():
                out[index] = node
        i = tail_end
    return out if out is not None else nodes


def _link_turn(nodes: list[Node], start: int, end: int, tail_end: int) -> dict[int, Node]:
    """The nodes of one turn (model contents ``start:end``, the others up to
    ``tail_end``) whose ids change."""
    origin = nodes[start].origin if nodes[start].origin is not None else start
    calls: list[tuple[int, int, ToolCall]] = []  # (node, block, call with its view id)
    wire_ids: set[str] = set()
    for ni in range(start, end):
        for bi, block in enumerate(nodes[ni].blocks):
            if isinstance(block, ToolCall):
                place = f"{POSITION_PREFIX}{origin}:{len(calls)}"
                calls.append((ni, bi, block if block.id else replace(block, id=place)))
                if block.id:
                    wire_ids.add(block.id)
    if not calls:  # the turn's responses are orphans, their ids as they came
        return {}
    by_id_answered: set[str] = set()
    pending: list[tuple[int, int, ToolResult]] = []
    for ti in range(end, tail_end):
        for bi, block in enumerate(nodes[ti].blocks):
            if isinstance(block, ToolResult) and not block.text_protocol:
                if block.call_id and block.call_id in wire_ids:
                    by_id_answered.add(block.call_id)
                else:
                    pending.append((ti, bi, block))
    waiting: dict[str, deque[str]] = {}  # name -> view ids of calls not answered by id
    for _, _, call in calls:
        if call.id not in by_id_answered:
            waiting.setdefault(call.name, deque()).append(call.id)
    new_blocks: dict[int, list[Block]] = {}
    for ni, bi, call in calls:
        if call is not nodes[ni].blocks[bi]:
            new_blocks.setdefault(ni, list(nodes[ni].blocks))[bi] = call
    for ti, bi, result in pending:
        if result.call_id and wire_ids:  # its id is no call's: Gemini refuses it, an orphan
            continue
        queue = waiting.get(result.tool_name or "")
        call_id = queue.popleft() if queue else result.call_id
        if call_id != result.call_id:
            new_blocks.setdefault(ti, list(nodes[ti].blocks))[bi] = replace(result, call_id=call_id)
    # Not with_blocks: the node is still the wire message as it came (written as it is).
    return {ni: replace(nodes[ni], blocks=tuple(blocks)) for ni, blocks in new_blocks.items()}


def wire_id(view: str) -> str | None:
    """The id a call or response carries on the wire (:func:`view_id` undone): none for a
    view id made by position."""
    if not view or view.startswith(POSITION_PREFIX):
        return None
    return view.removeprefix(ESCAPE_PREFIX)


# -- Gemini's rules, read from the wire contents (the repair's oracle) -----------------------

_COUNT = (
    "Please ensure that the number of function response parts is equal to the number of "
    "function call parts of the function call turn."
)
_AFTER = "Please ensure that function response turn comes immediately after a function call turn."


def _parts(content: dict[str, Any], key: str) -> list[dict[str, Any]]:
    parts = content.get("parts")
    if not isinstance(parts, list):
        return []
    return [p[key] for p in parts if isinstance(p, dict) and isinstance(p.get(key), dict)]


def violations(contents: Sequence[dict[str, Any]]) -> list[Violation]:
    out: list[Violation] = []
    for i, content in enumerate(contents):
        calls = _parts(content, "functionCall") if content.get("role") == "model" else []
        responses = _parts(content, "functionResponse")
        for k, call in enumerate(calls):
            if blank_name(call.get("name")):
                out.append(
                    Violation(
                        i,
                        "empty_name",
                        f"contents[{i}].parts[{k}]: function call name must not be empty",
                    )
                )
        if responses:
            previous = contents[i - 1] if i else None
            called = (
                _parts(previous, "functionCall")
                if previous is not None and previous.get("role") == "model"
                else []
            )
            if not called:
                out.append(Violation(i, "orphan_result", _AFTER))
        if not calls:
            continue
        following = contents[i + 1] if i + 1 < len(contents) else None
        answers = (
            _parts(following, "functionResponse")
            if following is not None and following.get("role") != "model"
            else []
        )
        if len(answers) != len(calls):
            code = "missing_result" if len(answers) < len(calls) else "duplicate_result"
            out.append(Violation(i, code, _COUNT))
            continue
        ids = {call.get("id") for call in calls} - {None, ""}
        for answer in answers:
            uid = answer.get("id")
            if ids and uid and uid not in ids:
                out.append(
                    Violation(
                        i + 1,
                        "orphan_result",
                        f"function response id {uid!r} "
                        "matches no function call of the turn before it",
                    )
                )
    return sorted(out, key=lambda v: v.index)
