"""Loop guards (Ethos): too many tool calls in one user turn, or the same call repeated.

A runaway agent keeps calling tools without converging: reading slightly different files,
or re-invoking one tool. The guard counts the calls made since the last message from the
user (across all of the model's iterations in that turn) and reports when a count passes
its limit. The policy chooses what else happens: nothing (``report``), a notice appended
to the latest tool result telling the model to stop (``annotate``, written once), or a
:class:`LoopGuardError` the host catches to end the turn (``raise``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from middleware.errors import LoopGuardError
from middleware.plugin.markers import hookimpl
from middleware.policy.quoting import prose
from middleware.policy.settings import bind, section
from middleware.policy.templates import fill
from middleware.report import LoopAlert
from middleware.view import Conversation, Node, ToolCall, ToolResult

if TYPE_CHECKING:
    from middleware.policy import Policy


@section("loop_guard")
@dataclass(frozen=True)
class LoopGuardSettings:
    enabled: bool
    max_calls_per_turn: int | None
    max_identical_calls: int | None
    identical: Literal["name", "name_and_arguments"]
    action: Literal["report", "annotate", "raise"]
    notice: str


@hookimpl(tryfirst=True)
def loop_alerts(conversation: Conversation, policy: Policy) -> list[LoopAlert]:
    """The loop guard as a plugin (the host calls it after the three steps)."""
    return guard_loops(conversation, policy)


def guard_loops(conversation: Conversation, policy: Policy) -> list[LoopAlert]:
    """Check the current user turn; annotate or raise as the policy says."""
    settings = bind(policy, LoopGuardSettings)
    if not settings.enabled:
        return []
    alerts = find_loops(current_turn_calls(conversation.nodes), settings)
    if not alerts:
        return []
    if settings.action == "raise":
        raise LoopGuardError("; ".join(alert.reason for alert in alerts), alerts)
    if settings.action == "annotate":
        notice = fill(settings.notice, {"reason": "; ".join(_reason(a) for a in alerts)}, {})
        if _annotate(conversation, notice):
            alerts = [replace(alert, annotated=True) for alert in alerts]
    return alerts


def current_turn_calls(nodes: list[Node]) -> list[ToolCall]:
    """The tool calls made since the last user message that is not only tool results."""
    start = len(nodes)
    while start > 0 and not (nodes[start - 1].role == "user" and not nodes[start - 1].results):
        start -= 1
    return [call for node in nodes[start:] for call in node.calls]


def find_loops(calls: list[ToolCall], settings: LoopGuardSettings) -> list[LoopAlert]:
    alerts = []
    limit = settings.max_calls_per_turn
    if limit is not None and len(calls) > limit:
        ids = tuple(c.id for c in calls)
        alerts.append(LoopAlert("too_many_calls", len(calls), limit, None, ids))
    same = settings.max_identical_calls
    if same is not None:
        keys = [_key(call, settings.identical) for call in calls]
        for key, count in Counter(keys).items():
            if count > same:
                ids = tuple(c.id for c, k in zip(calls, keys, strict=True) if k == key)
                alerts.append(LoopAlert("repeated_call", count, same, key[0], ids))
    return alerts


def _reason(alert: LoopAlert) -> str:
    """The alert's reason as the notice says it: the tool's name escaped like any name."""
    if alert.tool_name is None:
        return alert.reason
    return replace(alert, tool_name=prose(alert.tool_name)).reason


def _key(call: ToolCall, identical: str) -> tuple[str, str]:
    if identical == "name":
        return (call.name, "")
    return (call.name, call.canonical_arguments)


def _annotate(conversation: Conversation, notice: str) -> bool:
    """Append ``notice`` to the latest tool result, unless it already ends with it."""
    for node_index in range(len(conversation.nodes) - 1, -1, -1):
        node = conversation.nodes[node_index]
        for block_index in range(len(node.blocks) - 1, -1, -1):
            block = node.blocks[block_index]
            if isinstance(block, ToolResult):
                if not block.text.endswith(notice):
                    text = f"{block.text}\n\n{notice}" if block.text else notice
                    conversation.replace_block(node_index, block_index, block.with_text(text))
                    return True
                return False
    return False
