"""One abstract history, written in each of the three wire formats, and read back.

Pairing tests describe a history once (``U``, ``S``, ``A``, ``R``) and check the repair in
every format: :func:`build` writes the wire messages, :func:`flatten` reads any wire
history back into a format-neutral list of tuples that the expectations are written in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

FORMATS = ("anthropic", "openai", "responses")


@dataclass(frozen=True)
class Call:
    id: str
    name: str = "web_fetch"
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Res:
    id: str
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class U:
    text: str


@dataclass(frozen=True)
class S:
    text: str


@dataclass(frozen=True)
class A:
    """An assistant message: optional text, then tool calls."""

    text: str | None = None
    calls: tuple[Call, ...] = ()


@dataclass(frozen=True)
class R:
    """The results answering a turn: one user message of ``tool_result`` blocks
    (Anthropic), or one message / item per result (OpenAI, Responses)."""

    results: tuple[Res, ...]


Msg = U | S | A | R


def calls(*ids: str, name: str = "web_fetch") -> tuple[Call, ...]:
    return tuple(Call(i, name) for i in ids)


def results(*pairs: tuple[str, str]) -> R:
    return R(tuple(Res(i, c) for i, c in pairs))


def build(history: list[Msg], fmt: str) -> list[dict[str, Any]]:
    """``history`` in wire format ``fmt``."""
    out: list[dict[str, Any]] = []
    for msg in history:
        if fmt == "anthropic":
            out.extend(_anthropic(msg))
        elif fmt == "openai":
            out.extend(_openai(msg))
        else:
            out.extend(_responses(msg))
    return out


def _anthropic(msg: Msg) -> list[dict[str, Any]]:
    if isinstance(msg, (U, S)):
        return [{"role": "user", "content": msg.text}]
    if isinstance(msg, A):
        content: list[dict[str, Any]] = []
        if msg.text:
            content.append({"type": "text", "text": msg.text})
        content.extend(
            {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.args)}
            for c in msg.calls
        )
        return [{"role": "assistant", "content": content}]
    blocks: list[dict[str, Any]] = []
    for r in msg.results:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": r.id, "content": r.content}
        if r.is_error:
            block["is_error"] = True
        blocks.append(block)
    return [{"role": "user", "content": blocks}]


def _openai(msg: Msg) -> list[dict[str, Any]]:
    if isinstance(msg, U):
        return [{"role": "user", "content": msg.text}]
    if isinstance(msg, S):
        return [{"role": "system", "content": msg.text}]
    if isinstance(msg, A):
        out: dict[str, Any] = {"role": "assistant", "content": msg.text}
        if msg.calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.args)},
                }
                for c in msg.calls
            ]
        return [out]
    return [{"role": "tool", "tool_call_id": r.id, "content": r.content} for r in msg.results]


def _responses(msg: Msg) -> list[dict[str, Any]]:
    if isinstance(msg, (U, S)):
        role = "user" if isinstance(msg, U) else "system"
        return [{"type": "message", "role": role, "content": msg.text}]
    if isinstance(msg, A):
        out: list[dict[str, Any]] = []
        if msg.text:
            out.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": msg.text}],
                }
            )
        out.extend(
            {
                "type": "function_call",
                "call_id": c.id,
                "name": c.name,
                "arguments": json.dumps(c.args),
            }
            for c in msg.calls
        )
        return out
    return [
        {"type": "function_call_output", "call_id": r.id, "output": r.content} for r in msg.results
    ]


# -- reading back ----------------------------------------------------------------------------

#: ("user", text) | ("system", text) | ("assistant", text, ids) | ("result", id, content)
Flat = tuple[Any, ...]


def flatten(messages: list[dict[str, Any]], fmt: str) -> list[Flat]:
    """A format-neutral reading of a wire history (results as separate entries)."""
    if fmt == "responses":
        return _flat_responses(messages)
    out: list[Flat] = []
    for m in messages:
        out.extend(_flat_anthropic(m) if fmt == "anthropic" else _flat_openai(m))
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def _flat_anthropic(m: dict[str, Any]) -> list[Flat]:
    content = m["content"]
    if m["role"] == "assistant":
        text = "".join(b["text"] for b in content if b["type"] == "text") or None
        ids = tuple(b["id"] for b in content if b["type"] == "tool_use")
        return [("assistant", text, ids)]
    if isinstance(content, str):
        return [("user", content)]
    out: list[Flat] = []
    for b in content:
        if b["type"] == "tool_result":
            out.append(("result", b["tool_use_id"], _text(b.get("content"))))
        elif b["type"] == "text":
            out.append(("user", b["text"]))
    return out


def _flat_openai(m: dict[str, Any]) -> list[Flat]:
    if m["role"] == "assistant":
        ids = tuple(c["id"] for c in m.get("tool_calls") or [])
        return [("assistant", m.get("content") or None, ids)]
    if m["role"] == "tool":
        return [("result", m["tool_call_id"], _text(m["content"]))]
    return [(m["role"], _text(m["content"]))]


def _flat_responses(items: list[dict[str, Any]]) -> list[Flat]:
    """An assistant message item and the function calls right after it read as one
    assistant entry, as :func:`build` writes them."""
    out: list[Flat] = []
    open_assistant = False
    for m in items:
        kind = m.get("type", "message")
        if kind == "function_call":
            if open_assistant:
                _, text, ids = out[-1]
                out[-1] = ("assistant", text, (*ids, m["call_id"]))
            else:
                out.append(("assistant", None, (m["call_id"],)))
            open_assistant = True
            continue
        open_assistant = kind == "message" and m["role"] == "assistant"
        if kind in ("function_call_output", "custom_tool_call_output"):
            out.append(("result", m["call_id"], _text(m["output"])))
        elif open_assistant:
            out.append(("assistant", _text(m["content"]) or None, ()))
        else:
            out.append((m["role"], _text(m["content"])))
    return out
