"""Pairing repair, the shortcut: a history that is already paired as the format wants.

Nearly every request an agent sends is valid, and the analysis (:mod:`.analysis`) and the
layout (:mod:`.placement`) would build their tables only to hand back the same nodes. One
walk decides that first, in a stricter form than the repair needs (every call named, with
an id no other call has and, for Anthropic, one the API accepts; each assistant message
with calls answered right after it, by one result per call and nothing else), so whatever
it accepts the full repair leaves exactly as it is and reports nothing
(``tests/steps/pairing/test_pairing_valid.py`` holds it to that on fuzzed histories).
Anything it does not accept goes through the full repair, which decides.
"""

from __future__ import annotations

from collections.abc import Sequence

from middleware.formats.fields import unnamed
from middleware.steps.pairing.plan import Rules
from middleware.view import Node, ToolCall, ToolResult


def already_paired(nodes: Sequence[Node], rules: Rules) -> bool:
    """Whether the full repair would leave ``nodes`` as they are and report nothing
    (``False`` also when it might: Responses is always repaired in full)."""
    if rules.codec.reasoning_items:
        return False
    shared = rules.codec.results_share_message
    seen: set[str] = set()  # ids of every call so far
    waiting: dict[str, ToolCall] = {}  # calls of the last assistant message not answered yet
    sanitize = rules.sanitize_ids
    for node in nodes:
        results = node.results  # worked out once per node, like its calls
        if node.role == "assistant":
            if waiting or results:  # calls left unanswered, or calls in two messages of
                return False  # one turn; or a result where only calls may be
            for call in node.calls:
                call_id = call.id
                if not call_id or call_id in seen or unnamed(call):
                    return False
                if sanitize and not rules.codec.accepts_call_id(call_id):
                    return False
                seen.add(call_id)
                waiting[call_id] = call
            continue
        if not waiting:  # a result here would be an orphan or a duplicate
            if any(not result.text_protocol for result in results):
                return False
            continue
        blocks = node.blocks
        if shared:  # Anthropic: every result at the start of the next user message
            if node.role != "user" or not _answers_all(blocks, waiting, rules):
                return False
        elif not (
            len(blocks) == 1 and results and _answers_all(blocks, waiting, rules, partial=True)
        ):
            return False  # OpenAI: one tool message per call, before anything else
    return not waiting


def _answers_all(
    blocks: Sequence[object], waiting: dict[str, ToolCall], rules: Rules, partial: bool = False
) -> bool:
    """Whether ``blocks`` start with results that each answer a different waiting call
    (removed from ``waiting``), hold no result after another block, and (unless
    ``partial``) leave no call waiting."""
    leading = True
    for block in blocks:
        if not isinstance(block, ToolResult):
            leading = False
            continue
        if block.text_protocol or not leading:
            return False
        call = waiting.pop(block.call_id, None)
        if call is None or not rules.codec.answers(block, call):
            return False
    return partial or not waiting
