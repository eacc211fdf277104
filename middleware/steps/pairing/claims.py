"""Pairing repair, part 1b: each turn claims its results (block-scoped; a real output
before a stand-in; id-less pairs by position when unambiguous), and what is left over is
reported as dropped. Called by the analysis (:mod:`.analysis`) once per region."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from middleware.formats.base import Codec
from middleware.report import ActionKind
from middleware.steps.pairing.plan import (
    CallEntry,
    Plan,
    Recorder,
    Region,
    ResultEntry,
    Rules,
    is_paired_result,
    jsonable,
)
from middleware.view import Node, ToolCall, ToolResult


def claim_results(
    plan: Plan, nodes: Sequence[Node], region: Region, rules: Rules, record: Recorder
) -> None:
    """Let the turn's calls claim the results of its tail (one dictionary lookup per
    result, whatever the turn size): each call keeps one result with its id, of a kind
    that answers it; the others are orphans or duplicates. A call and a result that both
    lost their id pair by position when that is unambiguous (:func:`_pair_idless`)."""
    waiting: dict[str, list[CallEntry]] = {}  # kept calls first, then dropped ones
    for group in (plan.calls, plan.dropped):
        for ni in region.assistants:
            for call in group.get(ni, ()):
                waiting.setdefault(call.original_id, []).append(call)
    idless = waiting.pop("", [])
    idless_results: list[ResultEntry] = []
    by_id: dict[str, list[ResultEntry]] = {}
    for ti in region.tail:
        for bi, block in enumerate(nodes[ti].blocks):
            if not is_paired_result(block):
                continue
            assert isinstance(block, ToolResult)
            entry = ResultEntry(ti, bi, block, "orphan")
            plan.results[(ti, bi)] = entry
            if not block.call_id:
                entry.reason = "the result has no tool call id"
                idless_results.append(entry)
            elif block.call_id not in waiting:
                entry.reason = (
                    "no call with this id in the assistant turn before it"
                    if region.assistants
                    else "no assistant turn before it"
                )
            else:
                by_id.setdefault(block.call_id, []).append(entry)
    for call_id, results in by_id.items():
        _assign(waiting[call_id], results, rules)
    _pair_idless(nodes, region, rules.codec, calls=idless, results=idless_results, record=record)


def _pair_idless(
    nodes: Sequence[Node],
    region: Region,
    codec: Codec,
    *,
    calls: list[CallEntry],
    results: list[ResultEntry],
    record: Recorder,
) -> None:
    """The one call without an id of a turn is answered by the one result without an id
    of its region, when that result comes right after the turn (in the message after it;
    OpenAI and Responses: among the results directly after it) and is of a kind that
    answers it. With two of either, which answers which would be a guess: they stay a
    synthetic result and an orphan."""
    if len(calls) != 1 or len(results) != 1:
        return
    (call,), (entry,) = calls, results
    if entry.node not in _adjacent(nodes, region, codec) or not codec.answers(
        entry.result, call.call
    ):
        return
    call.result = entry
    if call.dropped:
        entry.reason = "it answers a call dropped for having no tool name"
        return
    entry.fate, entry.call = "claimed", call
    entry.result = replace(entry.result, call_id=call.call.id)
    record(
        ActionKind.RESULT_PAIRED_BY_POSITION,
        tool_call_id=call.call.id,
        tool_name=call.call.name,
        message_index=nodes[entry.node].origin,
        call_message_index=nodes[call.node].origin,
        reason="the call and its result both had no id; the result right after the call answers it",
    )


def _adjacent(nodes: Sequence[Node], region: Region, codec: Codec) -> set[int]:
    """The tail nodes right after the turn that hold its results: the first one if it
    holds any (results share a message), else the leading run of result nodes."""
    out: set[int] = set()
    for ti in region.tail:
        if not any(is_paired_result(b) for b in nodes[ti].blocks):
            break
        out.add(ti)
        if codec.results_share_message:
            break
    return out


def _assign(calls: list[CallEntry], results: list[ResultEntry], rules: Rules) -> None:
    """Pair the calls sharing one id with the results carrying it (all in order). When
    there are more results than calls, real outputs are kept before error and synthetic
    ones, the first among equals."""
    waiting = _Waiting(calls, rules.codec)
    fitting: list[ResultEntry] = []
    for entry in results:
        if waiting.fits(entry.result):
            fitting.append(entry)
        else:
            entry.reason = (
                f"the {_kind(entry.result.raw)} does not answer the {waiting.kinds()} with this id"
            )
    order: list[int] = list(range(len(fitting)))
    if len(fitting) > len(calls):
        order = sorted(order, key=lambda i: (rules.placeholder(fitting[i].result), i))
    keep = set(order[: len(calls)])
    for i, entry in enumerate(fitting):
        match = waiting.take(entry.result) if i in keep else None
        if match is None and not calls[0].dropped:
            entry.fate, entry.call = "duplicate", calls[0]
            entry.reason = "another result already answers this call"
            continue
        if match is None or match.dropped:
            entry.reason = "it answers a call dropped for having no tool name"
            if match is not None:
                match.result = entry
            continue
        match.result = entry
        entry.fate, entry.call = "claimed", match
        if match.call.id != entry.result.call_id:
            entry.result = replace(entry.result, call_id=match.call.id)


class _Waiting:
    """The calls sharing one id that no result has taken yet, in order, grouped by kind.

    :meth:`Codec.answers` looks at the kinds of a result and a call only (the wire type of
    the block), so the first call of a kind answers for all of that kind: finding the
    first call a result can answer costs one check per kind, not one per call. Thousands
    of calls can share an id in one turn (unnamed calls are dropped before duplicates are,
    and never renamed); scanning them all for each of thousands of results of another kind
    was quadratic."""

    def __init__(self, calls: list[CallEntry], codec: Codec) -> None:
        self.calls = calls
        self.codec = codec
        #: kind -> (its first call, the calls of that kind not taken yet with their order)
        self._groups: dict[object, tuple[CallEntry, deque[tuple[int, CallEntry]]]] = {}
        for position, call in enumerate(calls):
            group = self._groups.setdefault(_call_kind(call.call), (call, deque()))
            group[1].append((position, call))
        self._kinds: str | None = None

    def fits(self, result: ToolResult) -> bool:
        """Whether ``result`` is of a kind that answers one of the calls (taken or not)."""
        return any(self.codec.answers(result, first.call) for first, _ in self._groups.values())

    def take(self, result: ToolResult) -> CallEntry | None:
        """Remove and return the first waiting call ``result`` can answer."""
        best: deque[tuple[int, CallEntry]] | None = None
        for first, queue in self._groups.values():
            if not queue or (best is not None and best[0][0] < queue[0][0]):
                continue
            if self.codec.answers(result, first.call):
                best = queue
        return best.popleft()[1] if best is not None else None

    def kinds(self) -> str:
        """The wire types of the calls, for a reason (worked out once)."""
        if self._kinds is None:
            self._kinds = ", ".join(sorted({_kind(c.call.raw) for c in self.calls}))
        return self._kinds


def _call_kind(call: ToolCall) -> object:
    """What :meth:`Codec.answers` reads of a call: its block's wire type (with Responses,
    ``item_type``: the ``type`` string, else whether it has a role; ``None`` for a call
    with no wire form). A call whose wire form is not an object is a kind of its own."""
    raw = call.raw
    if raw is None:
        return None
    if not isinstance(raw, dict):
        return ("call", id(call))
    kind = raw.get("type")
    return ("type", kind) if isinstance(kind, str) else ("untyped", "role" in raw)


def record_drops(plan: Plan, nodes: Sequence[Node], region: Region, record: Recorder) -> None:
    """Report every result of the tail that is dropped, in tail order, with its content."""
    for ti in region.tail:
        for bi in range(len(nodes[ti].blocks)):
            entry = plan.results.get((ti, bi))
            if entry is None or entry.fate == "claimed":
                continue
            block = entry.result
            duplicate = entry.fate == "duplicate"
            record(
                ActionKind.DUPLICATE_RESULT_DROPPED if duplicate else ActionKind.ORPHAN_DROPPED,
                tool_call_id=block.call_id,
                tool_name=entry.call.call.name if duplicate and entry.call else None,
                message_index=nodes[ti].origin,
                chars_before=len(block.text),
                chars_after=0,
                content=jsonable(block.content),
                is_error=block.is_error,
                reason=entry.reason,
            )


def _kind(raw: Any) -> str:
    """The wire type of a block, for reasons (``tool_use``, ``function_call_output``...)."""
    kind = raw.get("type") if isinstance(raw, dict) else None
    return kind if isinstance(kind, str) else "result"
