"""What a request body says, in any wire format the agents speak: the prompts, tool calls,
tool results and compactions the model sees, in order (what the scripted model decides
from, :mod:`agent_script`, and what the tests of the agents read back)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

#: How Codex CLI starts the user message that replaces a history it compacted itself (under a
#: provider not named ``OpenAI``), before the summary the model wrote in a turn of its own.
CODEX_SUMMARY = "Another language model started to solve this problem"


@dataclass(frozen=True)
class Event:
    """One step of a conversation as the model sees it: a typed ``prompt``, a tool
    ``call`` (its name and arguments), a tool ``result`` (its text) or a ``compaction``
    (a Responses ``compaction`` item, an Anthropic ``compaction`` block, the summary Codex
    CLI wrote in place of a history it compacted locally: the agent's own compaction of what
    came before)."""

    kind: str
    text: str = ""
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            _text(block.get("text", block.get("content", "")))
            if isinstance(block, dict)
            else str(block)
            for block in content
        )
    return "" if content is None else json.dumps(content)


def events(fmt: str, body: dict[str, Any]) -> list[Event]:
    """The prompts, calls and results of a request body, in order."""
    out: list[Event] = []
    if fmt == "gemini":
        return _gemini_events(body)
    history = body.get("input" if fmt == "responses" else "messages") or []
    for item in history if isinstance(history, list) else []:
        if fmt == "responses":
            kind = item.get("type", "message")
            if kind == "function_call":
                out.append(
                    Event("call", name=item["name"], arguments=json.loads(item["arguments"]))
                )
            elif kind == "function_call_output":
                out.append(Event("result", _text(item.get("output"))))
            elif kind == "message" and item.get("role") == "user":
                typed = _text(item.get("content"))
                local = typed.startswith(CODEX_SUMMARY)  # Codex compacted it itself
                out.append(Event("compaction") if local else Event("prompt", typed))
            elif kind == "compaction":
                out.append(Event("compaction"))
            continue
        role, content = item.get("role"), item.get("content")
        if fmt == "openai":
            if role == "tool":
                out.append(Event("result", _text(content)))
            elif role == "user":
                out.append(Event("prompt", _text(content)))
            for call in item.get("tool_calls") or []:
                function = call["function"]
                out.append(
                    Event(
                        "call",
                        name=function["name"],
                        arguments=json.loads(function["arguments"] or "{}"),
                    )
                )
            continue
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        typed = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        if role == "user" and typed:
            out.append(Event("prompt", typed))
        for block in blocks:
            if block.get("type") == "tool_use":
                out.append(Event("call", name=block["name"], arguments=block.get("input") or {}))
            elif block.get("type") == "tool_result":
                out.append(Event("result", _text(block.get("content"))))
            elif block.get("type") == "compaction":
                out.append(Event("compaction"))
    return out


def _gemini_events(body: dict[str, Any]) -> list[Event]:
    out: list[Event] = []
    for content in body.get("contents") or []:
        parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
        typed = "".join(p["text"] for p in parts if "text" in p and not p.get("thought"))
        if content.get("role", "user") == "user" and typed:
            out.append(Event("prompt", typed))
        for part in parts:
            if "functionCall" in part:
                call = part["functionCall"]
                out.append(Event("call", name=call["name"], arguments=call.get("args") or {}))
            elif "functionResponse" in part:
                response = part["functionResponse"].get("response") or {}
                said = response.get("output", response.get("error"))
                out.append(Event("result", said if isinstance(said, str) else json.dumps(response)))
    return out


def results(fmt: str, body: dict[str, Any]) -> list[str]:
    return [e.text for e in events(fmt, body) if e.kind == "result"]


def without_results(fmt: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with every tool result taken out."""
    out = copy.deepcopy(body)
    if fmt == "gemini":
        for content in out["contents"]:
            content["parts"] = [p for p in content["parts"] if "functionResponse" not in p]
        out["contents"] = [c for c in out["contents"] if c["parts"]]
        return out
    if fmt == "responses":
        out["input"] = [i for i in out["input"] if i.get("type") != "function_call_output"]
        return out
    for message in out["messages"]:
        if isinstance(message.get("content"), list):
            message["content"] = [b for b in message["content"] if b.get("type") != "tool_result"]
    out["messages"] = [m for m in out["messages"] if m.get("content") != []]
    return out
