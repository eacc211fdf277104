"""The ``recall`` tool the integrations can offer the model: lines of a spilled output, for
an agent without file tools (previews name it when ``recall.form`` is ``tool``).

What the tool is in each wire format, how to read its calls in a model's answer, how to
answer them and how to take them out of an answer: :func:`middleware.wrap` answers the
model's recall calls itself, so the agent's own loop never sees them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from middleware.formats import get_codec
from middleware.formats.declarations import ToolSpec
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
TOOL = ToolSpec(NAME, DESCRIPTION, PARAMETERS)
#: Lines read when the model names no limit.
DEFAULT_LIMIT = 200
#: The override of a policy whose previews name the tool.
TOOL_FORM = {"recall.form": "tool"}


def read(settings: SpillSettings, arguments: Mapping[str, Any]) -> str:
    """The lines a recall call asks for, or the error the model should see."""
    path, offset, limit = (
        arguments.get("path"),
        arguments.get("offset", 1),
        arguments.get("limit", DEFAULT_LIMIT),
    )
    if not isinstance(path, str) or not isinstance(offset, int) or not isinstance(limit, int):
        return "Error: recall takes a path (text) and an offset and limit (whole numbers)"
    try:
        return recall(path, settings, offset=offset, limit=limit).text
    except (RecallError, SpillError) as exc:
        return f"Error: {exc}"


def definition(fmt: str) -> dict[str, Any]:
    """The tool as a request of wire format ``fmt`` declares it."""
    return get_codec(fmt).tool_definition(TOOL)


def offered(fmt: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """``body`` with the tool added, if the request is not streamed and declares tools of
    its own; else ``None``. A streamed answer reaches the agent as it comes, so its recall
    calls could not be answered before the agent sees them."""
    tools = body.get("tools")
    if body.get("stream") or not isinstance(tools, list) or not tools:
        return None
    codec = get_codec(fmt)
    declared = (n for t in tools if isinstance(t, Mapping) for n in codec.declared_tool_names(t))
    if NAME in declared:
        return None  # the agent has a tool of that name: never shadow it
    return {**body, "tools": [*tools, definition(fmt)]}


def tool_policy(policy: str | Path | Policy | None) -> Policy:
    """The policy whose previews name the tool (``recall.form: tool``): ``policy`` loaded
    with that override, or a loaded one that sets it already."""
    if not isinstance(policy, Policy):
        return load_policy(policy, overrides=TOOL_FORM)
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
    for call_id, name, arguments in get_codec(fmt).answer_calls(answer):
        total += 1
        if name == NAME:
            found.append((call_id, arguments))
    return found, total


def follow_up(
    fmt: str, body: Mapping[str, Any], answer: Mapping[str, Any], results: list[tuple[str, str]]
) -> dict[str, Any]:
    """``body`` continued with the model's ``answer`` and the results of its recall calls
    (id, text): the request that asks the model again."""
    return get_codec(fmt).continued(body, answer, results)


def without_calls(fmt: str, answer: Mapping[str, Any]) -> dict[str, Any]:
    """``answer`` without its recall calls (the agent's loop gets only its own tools')."""
    return get_codec(fmt).answer_without_calls(answer, NAME)
