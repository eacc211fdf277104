"""Pairing repair, part 1: the analysis.

Splits the conversation into *regions* (one assistant turn and the nodes after it, up to the
next turn), fixes calls (unnamed ones and duplicates inside one message dropped, empty ids
generated, ids repeated in a later turn renamed where the format wants them unique) and
lets each turn claim its results (block-scoped; a real output before a stand-in; id-less
pairs by position when unambiguous). Every step is a dictionary lookup per call or result,
so the analysis is linear in the history. Nothing here edits the conversation;
:mod:`.placement` lays the nodes out from the plan.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from middleware.formats.base import Codec, unnamed
from middleware.formats.wire.anthropic import MAX_ID_LENGTH
from middleware.report import ActionKind
from middleware.view import Node, ToolCall, ToolResult

Fate = Literal["claimed", "orphan", "duplicate"]


class Recorder(Protocol):
    """What the step reports through (``StepContext.record`` has this signature)."""

    def __call__(
        self,
        kind: str,
        *,
        tool_call_id: str,
        tool_name: str | None = ...,
        message_index: int | None = ...,
        chars_before: int = ...,
        chars_after: int = ...,
        **detail: Any,
    ) -> None: ...


@dataclass
class CallEntry:
    """A tool call: where it is and the result that answers it (if any)."""

    node: int
    call: ToolCall
    #: The id as it came in (results carry this one); ``call.id`` is the final id.
    original_id: str
    result: ResultEntry | None = None
    #: Dropped (no tool name): what answers it is dropped with it.
    dropped: bool = False


@dataclass
class ResultEntry:
    """A structured tool result in a region's tail, and what becomes of it."""

    node: int
    block: int
    #: The result as it will be written (its id follows a renamed call).
    result: ToolResult
    fate: Fate
    call: CallEntry | None = None
    #: Why an orphan or a duplicate is dropped.
    reason: str = ""


@dataclass
class Region:
    """One assistant turn (consecutive assistant nodes) and the nodes up to the next turn.

    The first region has no assistant nodes: it holds what comes before the first turn.
    """

    assistants: list[int] = field(default_factory=list)
    tail: list[int] = field(default_factory=list)


@dataclass
class Plan:
    regions: list[Region]
    #: Kept calls of each assistant node, in block order.
    calls: dict[int, list[CallEntry]]
    #: Assistant nodes whose calls changed (``None``: the node goes, left with nothing a
    #: provider accepts: a Responses item whose call was dropped, a message of only
    #: dropped calls).
    assistant_nodes: dict[int, Node | None]
    #: Every structured result in a tail, by (node, block).
    results: dict[tuple[int, int], ResultEntry]
    #: Calls dropped for having no tool name, by assistant node.
    dropped: dict[int, list[CallEntry]] = field(default_factory=dict)


def is_paired_result(block: object) -> bool:
    """A structured tool result (text-protocol outputs are never paired)."""
    return isinstance(block, ToolResult) and not block.text_protocol


def split_regions(nodes: Sequence[Node]) -> list[Region]:
    regions = [Region()]
    for index, node in enumerate(nodes):
        last = regions[-1]
        if node.role == "assistant":
            if last.assistants and not last.tail:
                last.assistants.append(index)
            else:
                regions.append(Region([index]))
        else:
            last.tail.append(index)
    return regions


#: Texts other agents write for a tool result they never got (compared whole, stripped).
PLACEHOLDER_TEXTS = frozenset(
    {
        "aborted",  # Codex CLI's ensure_call_outputs_present
        "No result provided",  # pi's transformMessages
        "[openclaw] missing tool result in session history; inserted synthetic error result "
        "for transcript repair.",  # OpenClaw's session-transcript-repair
        "A restart occurred while this tool was in progress",  # a restarted agent's notice
    }
)


@dataclass(frozen=True)
class Rules:
    """What the analysis needs to know besides the nodes."""

    codec: Codec
    #: Rename ids repeated across turns (Anthropic).
    unique_ids: bool = False
    #: Rename ids the Anthropic API rejects.
    sanitize_ids: bool = False
    #: The policy's synthetic result text (a result reading so is a stand-in).
    missing_text: str = ""

    def placeholder(self, result: ToolResult) -> bool:
        """Whether ``result`` stands in for an output rather than being one: an error
        result, or the synthetic text of this repair or of a peer's."""
        if result.is_error:
            return True
        text = result.text.strip()
        return text == self.missing_text.strip() or text in PLACEHOLDER_TEXTS


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
        _claim(plan, nodes, region, rules, record)
        _record_drops(plan, nodes, region, record)
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
                arguments=_jsonable(block.arguments),
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
                arguments=_jsonable(block.arguments),
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


def _claim(
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


def _record_drops(plan: Plan, nodes: Sequence[Node], region: Region, record: Recorder) -> None:
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
                content=_jsonable(block.content),
                is_error=block.is_error,
                reason=entry.reason,
            )


def generated_id(codec: Codec, origin: int | None, block: int, call: ToolCall) -> str:
    """A deterministic id for a call that had none: a digest of its position and content,
    so the same history always gets the same id (and the same prompt-cache bytes)."""
    args = json.dumps(call.arguments, sort_keys=True, ensure_ascii=False, default=repr)
    digest = hashlib.sha256(f"{origin}:{block}:{call.name}:{args}".encode()).hexdigest()[:16]
    return codec.generated_id_prefix + digest


def sanitized_id(original: str) -> str:
    """An id the Anthropic API accepts for ``original``: characters outside
    ``[a-zA-Z0-9_-]`` become ``_`` and a digest of the original keeps distinct ids distinct
    (``call_1|fc_2`` -> ``call_1_fc_2_1f0c5a2b``), whatever else the history holds, so the
    rename never changes as the conversation grows."""
    digest = hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    stem = re.sub(r"[^a-zA-Z0-9_-]", "_", original)[: MAX_ID_LENGTH - len(digest) - 1]
    return f"{stem}_{digest}"


def _kind(raw: Any) -> str:
    """The wire type of a block, for reasons (``tool_use``, ``function_call_output``...)."""
    kind = raw.get("type") if isinstance(raw, dict) else None
    return kind if isinstance(kind, str) else "result"


class IdPool:
    """The ids a history uses, handing out unused ones: ``base`` itself if free, else
    ``base__N`` for the smallest free N >= 2, cut to keep within 64 characters when ``base``
    was (suffixes use only ``_`` and digits, so an id matching ``^[a-zA-Z0-9_-]+$`` still
    does). Ids are only ever added, so the search for a base resumes where it last stopped:
    one id repeated in every turn costs linear time, not quadratic."""

    def __init__(self, used: set[str]) -> None:
        self.used = used
        self._next: dict[str, int] = {}

    def take(self, base: str) -> str:
        if base not in self.used:
            return base
        n = self._next.get(base, 2)
        while True:
            suffix = f"__{n}"
            stem = base
            if len(base) <= MAX_ID_LENGTH < len(base) + len(suffix):
                stem = base[: MAX_ID_LENGTH - len(suffix)]
            candidate = stem + suffix
            if candidate not in self.used:
                self._next[base] = n + 1
                return candidate
            n += 1


def _jsonable(value: Any) -> Any:
    """Content and arguments as JSON-serialisable values for the report."""
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value
