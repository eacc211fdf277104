"""Pairing repair, part 1: the analysis (:func:`make_plan`).

Fixes each turn's calls (unnamed ones and duplicates inside one message dropped, empty ids
generated, ids repeated in a later turn renamed where the format wants them unique:
:mod:`.ids`) and lets each turn claim its results (:mod:`.claims`). Every step is a
dictionary lookup per call or result, so the analysis is linear in the history. Nothing
here edits the conversation; :mod:`.placement` lays the nodes out from the plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from middleware.formats.fields import unnamed
from middleware.report import ActionKind
from middleware.steps.pairing.claims import claim_results, record_drops
from middleware.steps.pairing.ids import IdPool, generated_id, sanitized_id
from middleware.steps.pairing.plan import (
    CallEntry,
    Plan,
    Recorder,
    Rules,
    jsonable,
    split_regions,
)
from middleware.view import Node, ToolCall


def make_plan(nodes: Sequence[Node], rules: Rules, record: Recorder) -> Plan:
    """Analyse ``nodes``: fix call ids, drop unusable calls, let each turn claim its
    results."""
    regions = split_regions(nodes)
    used = {b.id for n in nodes for b in n.calls} | {b.call_id for n in nodes for b in n.results}
    used.discard("")
    pool = IdPool(used)
    plan = Plan(regions, {}, {}, {})
    seen: set[str] = set()  # final ids of every kept call so far
    for region in regions:
        turn_seen: set[str] = set()  # Responses: one turn is one model response
        for ni in region.assistants:
            node = nodes[ni]
            if node.calls:
                unit_seen = turn_seen if rules.codec.duplicate_ids_within == "turn" else set()
                _fix_calls(
                    plan, node, ni, rules, unit_seen=unit_seen, seen=seen, pool=pool, record=record
                )
        claim_results(plan, nodes, region, rules, record)
        record_drops(plan, nodes, region, record)
    return plan


def _fix_calls(
    plan: Plan,
    node: Node,
    ni: int,
    rules: Rules,
    *,
    unit_seen: set[str],
    seen: set[str],
    pool: IdPool,
    record: Recorder,
) -> None:
    blocks: list[Any] = []
    entries: list[CallEntry] = []
    for bi, block in enumerate(node.blocks):
        if not isinstance(block, ToolCall):
            blocks.append(block)
            continue
        if unnamed(block):
            record(
                ActionKind.UNNAMED_CALL_DROPPED,
                tool_call_id=block.id,
                tool_name=block.name,
                message_index=node.origin,
                arguments=jsonable(block.arguments),
                reason="the call has no tool name (empty or blank), which providers reject",
            )
            plan.dropped.setdefault(ni, []).append(CallEntry(ni, block, block.id, dropped=True))
            continue
        if block.id and block.id in unit_seen:
            record(
                ActionKind.DUPLICATE_CALL_DROPPED,
                tool_call_id=block.id,
                tool_name=block.name,
                message_index=node.origin,
                arguments=jsonable(block.arguments),
                reason="the id repeats an earlier call of the same message",
            )
            continue
        final = block.id
        if not block.id:
            final = pool.take(generated_id(rules.codec, node.origin, bi, block))
            record(
                ActionKind.ID_GENERATED,
                tool_call_id=final,
                tool_name=block.name,
                message_index=node.origin,
                reason="the call had no id",
            )
        else:
            reason = None
            if rules.sanitize_ids and not rules.codec.accepts_call_id(block.id):
                final = pool.take(sanitized_id(block.id))
                reason = rules.codec.call_id_rule
            elif rules.unique_ids and block.id in seen:
                final = pool.take(block.id)
                reason = "tool call ids must be unique across the conversation"
            if reason is not None:
                record(
                    ActionKind.ID_RENAMED,
                    tool_call_id=final,
                    tool_name=block.name,
                    message_index=node.origin,
                    original_id=block.id,
                    reason=reason,
                )
        unit_seen.add(block.id)
        pool.used.add(final)
        seen.add(final)
        call = block if final == block.id else replace(block, id=final)
        entries.append(CallEntry(ni, call, block.id))
        blocks.append(call)
    plan.calls[ni] = entries
    if len(blocks) == len(node.blocks) and all(
        a is b for a, b in zip(blocks, node.blocks, strict=True)
    ):
        return
    changed = node.with_blocks(blocks)
    if not rules.codec.is_empty(changed):
        plan.assistant_nodes[ni] = changed
        return
    plan.assistant_nodes[ni] = None
    if not rules.codec.calls_are_items:  # a call item is the call, reported as dropped
        record(
            ActionKind.EMPTY_MESSAGE_REMOVED,
            tool_call_id="",
            message_index=node.origin,
            reason="every tool call of this assistant message was dropped and nothing else "
            "was left in it",
        )
