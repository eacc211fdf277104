"""The ``recall`` tool the integrations can offer the model: lines of a spilled output, for
an agent without file tools (previews name it when ``recall.form`` is ``tool``).

What the tool is in each wire format, how to read its calls in a model's answer, how to
answer them and how to take them out of an answer: :func:`middleware.wrap` answers the
model's recall calls itself, so the agent's own loop never sees them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from middleware.policy import Policy, load_policy
from middleware.policy.settings import bind
from middleware.spill import SpillError, SpillSettings
from middleware.spill.recall import RecallError, recall
from middleware.steps.read_back import ReadBack

NAME = "recall"
DESCRIPTION = (
    "Read lines of a tool output that was cut short. path: the file its preview names; "
    "offset: the first line to read (1 is the first); limit: how many lines."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "The file the preview names."},
        "offset": {"type": "integer", "minimum": 1, "description": "The first line (1-based)."},
        "limit": {"type": "integer", "minimum": 1, "description": "How many lines."},
    },
    "required": ["path"],
}
#: Lines read when the model names no limit.
DEFAULT_LIMIT = 200


def read(settings: SpillSettings, arguments: Mapping[str, Any]) -> str:
    """The lines a recall call asks for, or the error the model should see."""
    path, offset, limit = (
        arguments.get("path"), arguments.get("offset", 1), arguments.get("limit", DEFAULT_LIMIT)
    )  # fmt: skip
    if not isinstance(path, str) or not isinstance(offset, int) or not isinstance(limit, int):
        return "Error: recall takes a path (text) and an offset and limit (whole numbers)"
    try:
        return recall(path, settings, offset=offset, limit=limit).text
    except (RecallError, SpillError) as exc:
        return f"Error: {exc}"


def definition(fmt: str) -> dict[str, Any]:
    """The tool as a request of wire format ``fmt`` declares it."""
    if fmt == "anthropic":
        return {"name": NAME, "description": DESCRIPTION, "input_schema": PARAMETERS}
    if fmt == "openai":
        return {"type": "function", "function": {"name": NAME, "description": DESCRIPTION,
                                                 "parameters": PARAMETERS}}  # fmt: skip
    return {"type": "function", "name": NAME, "description": DESCRIPTION, "parameters": PARAMETERS}


def offered(fmt: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """``body`` with the tool added, if the request is not streamed and declares tools of
    its own; else ``None``. A streamed answer reaches the agent as it comes, so its recall
    calls could not be answered before the agent sees them."""
    tools = body.get("tools")
    if body.get("stream") or not isinstance(tools, list) or not tools:
        return None
    if any(_tool_name(tool) == NAME for tool in tools if isinstance(tool, Mapping)):
        return None  # the agent has a tool of that name: never shadow it
    return {**body, "tools": [*tools, definition(fmt)]}


def tool_policy(policy: str | Path | Policy | None) -> Policy:
    """The policy whose previews name the tool (``recall.form: tool``): ``policy`` loaded
    with that override, or a loaded one that sets it already."""
    if not isinstance(policy, Policy):
        return load_policy(policy, overrides={"recall.form": "tool"})
    if bind(policy, ReadBack).form != "tool":
        raise ValueError(
            "the recall tool needs previews that name it: set recall.form: tool in the "
            "policy, or pass the policy's path instead of a loaded Policy"
        )
    return policy


def calls(fmt: str, answer: Mapping[str, Any]) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """The recall calls of a model's ``answer`` (id, arguments), and how many tool calls
    it makes in all."""
    found: list[tuple[str, dict[str, Any]]] = []
    total = 0
    for call_id, name, arguments in _tool_calls(fmt, answer):
        total += 1
        if name == NAME:
            found.append((call_id, arguments))
    return found, total


def follow_up(
    fmt: str, body: Mapping[str, Any], answer: Mapping[str, Any], results: list[tuple[str, str]]
) -> dict[str, Any]:
    """``body`` continued with the model's ``answer`` and the results of its recall calls
    (id, text): the request that asks the model again."""
    out = dict(body)
    if fmt == "anthropic":
        out["messages"] = [
            *body["messages"],
            {"role": "assistant", "content": answer["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id,
                                          "content": text} for call_id, text in results]},
        ]  # fmt: skip
    elif fmt == "openai":
        message = dict(answer["choices"][0]["message"])
        out["messages"] = [
            *body["messages"],
            {k: v for k, v in message.items() if v is not None or k == "content"},
            *({"role": "tool", "tool_call_id": call_id, "content": text}
              for call_id, text in results),
        ]  # fmt: skip
    else:
        given = body.get("input")
        history = given if isinstance(given, list) else [{"role": "user", "content": given}]
        out["input"] = [
            *history,
            *answer["output"],
            *({"type": "function_call_output", "call_id": call_id, "output": text}
              for call_id, text in results),
        ]  # fmt: skip
    return out


def without_calls(fmt: str, answer: Mapping[str, Any]) -> dict[str, Any]:
    """``answer`` without its recall calls (the agent's loop gets only its own tools')."""
    out = dict(answer)
    if fmt == "anthropic":
        out["content"] = [b for b in answer["content"] if not _is_call(b, "tool_use")]
    elif fmt == "openai":
        choice = dict(answer["choices"][0])
        message = dict(choice["message"])
        kept = [c for c in message.get("tool_calls") or [] if c["function"]["name"] != NAME]
        message["tool_calls"] = kept or None
        choice["message"] = message
        out["choices"] = [choice, *answer["choices"][1:]]
    else:
        out["output"] = [i for i in answer["output"] if not _is_call(i, "function_call")]
    return out


def _is_call(item: Mapping[str, Any], kind: str) -> bool:
    return item.get("type") == kind and item.get("name") == NAME


def _tool_calls(fmt: str, answer: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    if fmt == "anthropic":
        return [(b["id"], b["name"], b.get("input") or {}) for b in answer.get("content") or []
                if b.get("type") == "tool_use"]  # fmt: skip
    if fmt == "openai":
        choices = answer.get("choices") or [{}]
        message = choices[0].get("message") or {}
        return [(c["id"], c["function"]["name"], _arguments(c["function"].get("arguments")))
                for c in message.get("tool_calls") or []]  # fmt: skip
    return [(i["call_id"], i["name"], _arguments(i.get("arguments")))
            for i in answer.get("output") or [] if i.get("type") == "function_call"]  # fmt: skip


def _arguments(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _tool_name(tool: Mapping[str, Any]) -> Any:
    function = tool.get("function")
    return function.get("name") if isinstance(function, Mapping) else tool.get("name")
