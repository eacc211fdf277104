"""A request that continues the session's previous one is worked on in its new part.

Agents send the whole history on every request: the previous request's messages as they
were, then the new turns. What the steps make of the old turns depends on those turns and
the policy (the budget step's caps), and on a boundary that moves a few times a session
(microcompaction). So when the previous request's messages come back unchanged, nothing
had to be repaired, and the boundary stays where it was, the old turns come out exactly
as the previous request made them, and only the new turns are worked on. Anything else (a
changed or missing message, a pairing repair, a policy reload, a decision admitted in
between, a step that cannot resume, a plugin that failed) and the request is processed in
full. Either way the output and the report are the same bytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from itertools import chain
from typing import Any, Protocol, TypeVar, cast

from middleware.cache import Identity
from middleware.report import Action, ActionKind, ProblemReport
from middleware.view import (
    Block,
    Conversation,
    Node,
    Opaque,
    ToolCall,
    ToolResult,
    value_chars,
)

#: Conversations remembered per pipeline: a Claude Code session sends its subagents'
#: requests under the same session as the main conversation's.
MAX_CONVERSATIONS = 8
#: Actions whose ``age`` is counted from the latest turn.
AGED_KINDS = frozenset({ActionKind.TRUNCATED, ActionKind.SUMMARIZED})
#: Bytes a remembered request holds for each message: its mark, its node (hollow when the
#: steps left it as it came), its share of the steps' carried weights and actions.
BYTES_PER_MESSAGE = 600
#: And for each character of the messages the steps changed (a preview, a summary and the
#: blocks beside them), parsed: measured on real sessions (tests/session/test_memory.py).
BYTES_PER_CHANGED_CHAR = 2


class Carry(Protocol):
    """What a step carries to the next request: it can be cut to the first messages."""

    def up_to(self, node: int) -> Carry:
        """What was carried for the messages before ``node`` alone."""
        ...


@dataclass
class Resume:
    """What a request that continues the session's previous one (the same messages, then
    new turns) may take from it: the steps leave the first ``from_node`` nodes (turns
    before ``from_turn``) as the previous request made them, which the conversation
    already holds, and work on the new part only. ``carried`` holds what each step left
    for the next request, by step name. A step that cannot work that way calls
    :meth:`refuse`: the request is then processed in full; one that works on the whole
    conversation after all says so in :attr:`redone`."""

    from_node: int
    from_turn: int
    carried: Mapping[str, Carry]
    refused: bool = False
    #: Steps that worked on the whole conversation after all (microcompaction when its
    #: boundary moves): their actions are all their own.
    redone: set[str] = field(default_factory=set)

    def refuse(self) -> None:
        self.refused = True


class StepRun(Protocol):
    """What running one step leaves (a step's context)."""

    step: str
    actions: list[Action]
    problems: list[ProblemReport]


Run = TypeVar("Run", bound=StepRun)
#: A step as the pipeline names it to :meth:`Continuations.run`.
Step = TypeVar("Step")


@dataclass(frozen=True)
class Previous:
    """What one request left for the next request of its conversation."""

    #: How the messages were read and decided: the policy, the wire format, and why user
    #: messages were read as tool output (:attr:`.Conversation.text_protocol`).
    reading: tuple[Identity, str, str | None]
    #: The mark of each message (:func:`.message_mark` of its exact copy).
    marks: tuple[int, ...]
    #: The conversation after the steps (before the loop guard, which runs on every
    #: request); once remembered, the messages the steps left as they came are
    #: :class:`Hollow` (see :func:`detached`).
    nodes: tuple[Node, ...]
    #: The steps' actions, by step name.
    actions: Mapping[str, tuple[Action, ...]]
    #: What each step left for the next request (:attr:`.Resume.carried`).
    carried: Mapping[str, Carry]
    #: Decisions in the pipeline's ledger: one admitted since changes an old result.
    decisions: int


class Continuations:
    """The last request of each of a pipeline's recent conversations (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: What each conversation's last request left, and the bytes it holds.
        self._by_opening: OrderedDict[int, tuple[Previous, int]] = OrderedDict()
        #: Requests that were worked on in their new part only.
        self.continued = 0
        #: Bytes the remembered requests hold (an estimate, :func:`held_bytes`).
        self.bytes = 0

    def resume(
        self,
        conversation: Conversation,
        marks: tuple[int, ...],
        reading: tuple[Identity, str, str | None],
        decisions: int,
    ) -> tuple[Previous, Resume, int] | None:
        """The previous request ``conversation`` continues, cut to the turns both share as
        they were and filled from this request's messages (:func:`filled`), what the steps
        may take from it, and the turns the previous request had; ``None`` when no turn is
        shared. ``conversation`` holds the messages as parsed (pairing found nothing to
        repair)."""
        # Agents move their cache markers forward on every request, so the previous
        # request's last messages often come back changed: the turns before the first
        # changed message are still shared.
        with self._lock:
            found = self._by_opening.get(marks[0]) if marks else None
        previous = found[0] if found is not None else None
        if previous is None or previous.reading != reading or previous.decisions != decisions:
            return None
        nodes = conversation.nodes
        if len(nodes) != len(marks):
            return None
        size = len(previous.marks)
        shared = 0
        limit = min(size, len(marks))
        while shared < limit and marks[shared] == previous.marks[shared]:
            shared += 1
        # The new part must open a turn, in this request and in the previous one (a turn
        # cut in two would have been decided as a whole).
        start = shared
        while start > 0 and not (
            start < len(nodes)
            and nodes[start].role == "assistant"
            and nodes[start - 1].role != "assistant"
            and (start == size or previous.nodes[start].role == "assistant")
        ):
            start -= 1
        if start == 0:
            return None
        turns = from_turn = turn_count(previous.nodes)
        if start < size:
            previous = _cut(previous, start)
            from_turn = turn_count(previous.nodes)
        previous = filled(previous, nodes)
        if previous is None:
            return None
        return previous, Resume(start, from_turn, previous.carried), turns

    def run(
        self,
        conversation: Conversation,
        marks: tuple[int, ...],
        *,
        reading: tuple[Identity, str, str | None],
        decisions: int,
        steps: Sequence[Step],
        run_step: Callable[[Step, Resume], Run],
    ) -> list[Run] | None:
        """Run ``steps`` on the new turns only, when ``conversation`` continues the
        previous request of its conversation as it was: their contexts, each holding the
        previous request's actions before its own. ``None``, and the conversation as it
        came, when it does not or a step cannot."""
        found = self.resume(conversation, marks, reading, decisions)
        if found is None:
            return None
        previous, resume, turns = found
        later_turns = turn_count(conversation.nodes) - turns
        before = conversation.checkpoint()
        install(conversation, previous)
        contexts = []
        for step in steps:
            context = run_step(step, resume)
            if resume.refused or context.problems:
                conversation.restore(before)
                return None
            if context.step not in resume.redone:
                context.actions[:0] = copies(previous.actions.get(context.step, ()), later_turns)
            contexts.append(context)
        with self._lock:
            self.continued += 1
        return contexts

    def remember(self, previous: Previous, parsed: Sequence[Node] = ()) -> None:
        """Keep what ``previous`` left for the next request of its conversation;
        ``parsed``: its messages as parsed, which the next request carries again (what
        the steps left as it came is not kept, see :func:`detached`)."""
        if not previous.marks or len(previous.marks) != len(previous.nodes):
            return  # messages and nodes must match one to one
        opening = previous.marks[0]
        with self._lock:
            earlier = self._by_opening.get(opening)
        kept = detached(previous, earlier[0] if earlier is not None else None, parsed)
        size = held_bytes(kept)
        with self._lock:
            replaced = self._by_opening.pop(opening, None)
            if replaced is not None:
                self.bytes -= replaced[1]
            self._by_opening[opening] = (kept, size)
            self.bytes += size
            while len(self._by_opening) > MAX_CONVERSATIONS:
                self.bytes -= self._by_opening.popitem(last=False)[1][1]

    def clear(self) -> list[int]:
        """Forget every conversation: the next request of each is processed in full, as
        by a pipeline that never saw it. Returns the marks of the messages that were
        remembered (:func:`.forget_messages` finds them in the message cache by these)."""
        with self._lock:
            remembered, self._by_opening = self._by_opening, OrderedDict()
            self.bytes = 0
        return [mark for previous, _ in remembered.values() for mark in previous.marks]


def held_bytes(previous: Previous) -> int:
    """An estimate of the memory ``previous`` keeps alive: a share per message, and the
    messages the steps changed (what a hollow message stands for is the next request's)."""
    changed = 0
    seen: set[int] = set()
    for node in chain(previous.nodes, *map(_carried_nodes, previous.carried.values())):
        if type(node) is not Hollow and id(node) not in seen:
            seen.add(id(node))
            changed += _node_chars(node)
    return len(previous.nodes) * BYTES_PER_MESSAGE + changed * BYTES_PER_CHANGED_CHAR


def _node_chars(node: Node) -> int:
    """The characters of ``node``'s blocks, worked out once per node (nodes are immutable;
    a remembered node is counted again on every request of its conversation)."""
    found: int | None = node.__dict__.get("_held_chars")
    if found is None:
        found = node.__dict__["_held_chars"] = _chars_of(node)
    return found


def _chars_of(node: Node) -> int:
    chars = 0
    for block in node.blocks:
        if isinstance(block, ToolResult):
            chars += block.chars + (len(block.original) if block.original is not None else 0)
        elif isinstance(block, ToolCall):
            chars += value_chars(block.arguments)
        elif isinstance(block, Opaque):
            chars += value_chars(block.raw)
    return chars


class Hollow(Node):
    """A remembered message the steps left as it came: its role and place alone. The next
    request that continues carries the same message there, parsed, which takes its place
    (:func:`filled`): a session does not keep a copy of every message it was sent."""


class Stripped(Node):
    """A remembered message the steps changed, without what it shares with the message as
    parsed, which the next request carries again: a block left as it came, and in a block
    that was changed, the wire block it was made from (:attr:`.ToolResult.raw`, which
    holds the full text a preview replaced) and the full text the budget step hands on
    (:attr:`.ToolResult.original`). :attr:`taken` names what :func:`filled` takes back
    from the next request's message."""

    @property
    def taken(self) -> tuple[tuple[int, str | None], ...]:
        """``(block, field)`` for each field left out; field ``None``: the whole block."""
        found: tuple[tuple[int, str | None], ...] = self.__dict__["_taken"]
        return found


#: Fields of a changed block that may be the parsed message's own objects.
_WIRE_FIELDS = ("raw", "original", "arguments", "content")
#: What stands for a block left as it came, in a :class:`Stripped` node.
_LEFT_OUT = Opaque(None)


def detached(
    previous: Previous, earlier: Previous | None = None, parsed: Sequence[Node] = ()
) -> Previous:
    """``previous`` as it is remembered: holding none of its request's wire messages (a
    node names the message it stands for, :attr:`.Node.raw`, and keeping it would keep
    the whole parsed request alive), nor what the next request carries again: a message
    of ``parsed`` (the request's messages as parsed) the steps left as it came is
    :class:`Hollow`, and a changed one keeps only what the steps made (:class:`Stripped`).
    Nodes of ``earlier`` (the conversation's request before) that stand for the same
    content at the same place are reused, so a request that continued costs one node per
    new message."""
    old = earlier.nodes if earlier is not None else ()
    made: dict[int, Node] = {}
    nodes = []
    for i, node in enumerate(previous.nodes):
        kept = old[i] if i < len(old) and _alike(old[i], node) else _kept(node, parsed)
        made[id(node)] = kept
        nodes.append(kept)

    def keep(node: Node) -> Node:
        kept = made.get(id(node))
        if kept is None:
            kept = made[id(node)] = _kept(node, parsed)
        return kept

    carried = {step: _carry_mapped(carry, keep) for step, carry in previous.carried.items()}
    return replace(previous, nodes=tuple(nodes), carried=carried)


def _kept(node: Node, parsed: Sequence[Node]) -> Node:
    """``node`` as it is remembered (:func:`detached`): the node it was filled from, if
    it still is what that one stood for (a request that continued remembers again what
    it took from the previous one)."""
    filled_from = node.__dict__.get(_FILLED_FROM)
    if (
        filled_from is not None
        and filled_from[1] is node.blocks
        and (filled_from[0].origin, filled_from[0].changed) == (node.origin, node.changed)
    ):
        remembered: Node = filled_from[0]
        return remembered
    at = node.origin
    source = parsed[at] if at is not None and at < len(parsed) else None
    if source is None or source.origin != at:  # not a message of the request as parsed
        return _without_raw(node)
    if not node.changed:
        if node.blocks is source.blocks and node.role == source.role:
            return Hollow(node.role, origin=at)
        return _without_raw(node)
    theirs = source.blocks
    blocks = list(node.blocks)
    taken: list[tuple[int, str | None]] = []
    for j, block in enumerate(node.blocks):
        their = theirs[j] if j < len(theirs) else None
        if their is None or type(their) is not type(block):
            continue
        if block is their:
            blocks[j] = _LEFT_OUT
            taken.append((j, None))
            continue
        shared = [
            name for name in _WIRE_FIELDS
            if (value := getattr(block, name, None)) is not None
            and (value is getattr(their, name) or (
                name == "original" and isinstance(their, ToolResult) and value == their.text))
        ]  # fmt: skip
        if shared:
            blocks[j] = _with_fields(block, dict.fromkeys(shared))
            taken.extend((j, name) for name in shared)
    if not taken:
        return _without_raw(node)
    stripped = Stripped(node.role, tuple(blocks), None, at, True, node.meta, node.raw_chars)
    stripped.__dict__["_taken"] = tuple(taken)
    return stripped


def _with_fields(block: Block, values: Mapping[str, Any]) -> Block:
    """``block`` with ``values`` in place of some of its fields (the constructor, not
    dataclasses.replace: every request that continues takes back a few dozen)."""
    kind = type(block)
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = tuple(f.name for f in fields(cast("Any", kind)))
    made: Block = kind(*[values[n] if n in values else getattr(block, n) for n in names])
    return made


#: The field names of each block dataclass, in order.
_FIELDS: dict[type, tuple[str, ...]] = {}
#: Where a filled node keeps the remembered node it was filled from, and its blocks then.
_FILLED_FROM = "_filled_from"


def _without_raw(node: Node) -> Node:
    return node if node.raw is None else node.rebound(None, node.origin, node.raw_chars)


def _alike(kept: Node, node: Node) -> bool:
    """Whether ``kept`` (detached) is ``node`` but for its wire message."""
    return (
        kept.blocks is node.blocks
        and kept.origin == node.origin
        and kept.changed == node.changed
        and kept.role == node.role
        and kept.raw_chars == node.raw_chars
        and kept.meta == node.meta
    )


def filled(previous: Previous, nodes: Sequence[Node]) -> Previous | None:
    """``previous`` (cut to the messages this request shares with it) with what it did
    not keep taken from ``nodes``, this request's messages as parsed: a :class:`Hollow`
    message is the parsed one at its place, a :class:`Stripped` one gets back what it
    left out. ``None`` if one stands for a message past those shared."""
    shared = len(previous.nodes)
    made: dict[int, Node] = {}
    missing = False

    def fill(node: Node) -> Node:
        nonlocal missing
        kind = type(node)
        if kind is not Hollow and kind is not Stripped:
            return node
        at = node.origin
        if at is None or at >= shared:
            missing = True
            return node
        if kind is Hollow:
            found = nodes[at]
            # (this request's own node: remembered as the same Hollow, _kept)
            found.__dict__[_FILLED_FROM] = (node, found.blocks)
            return found
        taken = made.get(id(node))  # (the same node in the carries: filled once)
        if taken is None:
            taken = made[id(node)] = _taken_back(cast("Stripped", node), nodes[at]) or node
            missing = missing or taken is node
        return taken

    refilled = tuple(map(fill, previous.nodes))
    carried = {step: _carry_mapped(carry, fill) for step, carry in previous.carried.items()}
    if missing:
        return None
    return replace(previous, nodes=refilled, carried=carried)


def _taken_back(stripped: Stripped, source: Node) -> Node | None:
    """``stripped`` with what it left out taken from ``source`` (the same message, parsed
    again); ``None`` if it is not."""
    blocks = list(stripped.blocks)
    theirs = source.blocks
    for j, name in stripped.taken:
        their = theirs[j] if j < len(theirs) else None
        if their is None:
            return None
        if name is None:
            blocks[j] = their
        elif name == "original":
            if not isinstance(their, ToolResult):
                return None
            blocks[j] = _with_fields(blocks[j], {name: their.text})
        else:
            blocks[j] = _with_fields(blocks[j], {name: getattr(their, name)})
    made = tuple(blocks)
    node = Node(stripped.role, made, None, stripped.origin, True, stripped.meta,
                stripped.raw_chars)  # fmt: skip
    # Remembered again as the same Stripped node while nothing changes it (_kept).
    node.__dict__[_FILLED_FROM] = (stripped, made)
    return node


def _node_fields(carry: Carry) -> Iterator[tuple[str, tuple[Node, ...]]]:
    """The fields of a step's carry that hold nodes, by name (a step's carry is its own
    named tuple; :class:`~middleware.steps.microcompact.schedule.Carried` keeps the
    conversation as the step found it)."""
    for name in getattr(carry, "_fields", ()):
        value = getattr(carry, name)
        if isinstance(value, tuple) and value and isinstance(value[0], Node):
            yield name, value


def _carried_nodes(carry: Carry) -> Iterator[Node]:
    """The nodes a step's carry holds."""
    for _, nodes in _node_fields(carry):
        yield from nodes


def _carry_mapped(carry: Carry, node_map: Callable[[Node], Node]) -> Carry:
    """``carry`` with every node it holds replaced by ``node_map`` of it."""
    changes = {name: tuple(map(node_map, nodes)) for name, nodes in _node_fields(carry)}
    if not changes:
        return carry
    replaced: Carry = getattr(carry, "_replace")(**changes)  # noqa: B009 (a named tuple's)
    return replaced


def _cut(previous: Previous, node: int) -> Previous:
    """``previous`` as if it had ended before ``node`` (where a turn opens)."""
    return Previous(
        previous.reading,
        previous.marks[:node],
        previous.nodes[:node],
        {
            step: tuple(
                a for a in actions if a.message_index is not None and a.message_index < node
            )
            for step, actions in previous.actions.items()
        },
        {step: carry.up_to(node) for step, carry in previous.carried.items()},
        previous.decisions,
    )


def install(conversation: Conversation, previous: Previous) -> None:
    """Put the old turns into ``conversation`` as ``previous`` made them, each still the
    wire message this request carries (the previous request's objects are its caller's)."""
    nodes = conversation.nodes
    for i, made in enumerate(previous.nodes):
        if made.changed:
            nodes[i] = made.in_place_of(nodes[i])


def copies(actions: Sequence[Action], later_turns: int = 0) -> tuple[Action, ...]:
    """Copies of ``actions``, to keep for the next request or to give it (a caller who
    edits one report's details never edits another's), ``later_turns`` turns on: a
    compacted result's ``age`` counts the turns after its own, so it grows with them (an
    input's counts from the boundary, which has not moved)."""
    return tuple(a.with_detail(_aged(a, later_turns)) for a in actions)


def _aged(action: Action, later_turns: int) -> dict[str, object]:
    detail = dict(action.detail)
    if action.kind in AGED_KINDS and isinstance(detail.get("age"), int):
        detail["age"] += later_turns
    return detail


def turn_count(nodes: Sequence[Node]) -> int:
    """Assistant turns of ``nodes`` (a run of assistant messages is one turn)."""
    return sum(
        1
        for i, node in enumerate(nodes)
        if node.role == "assistant" and (i == 0 or nodes[i - 1].role != "assistant")
    )
