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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

from middleware.cache import Identity
from middleware.report import Action, ProblemReport
from middleware.view import Conversation, Node

#: Conversations remembered per pipeline: a Claude Code session sends its subagents'
#: requests under the same session as the main conversation's.
MAX_CONVERSATIONS = 8
#: Wire formats whose turns are messages (Responses items are always repaired in full).
FORMATS = frozenset({"anthropic", "openai"})
#: Actions whose ``age`` is counted from the latest turn.
AGED_KINDS = frozenset({"truncated", "summarized"})
#: Bytes a remembered request holds for each byte of its messages' exact copies: the copy,
#: the parsed blocks (shared with the message cache while it keeps them) and what the steps
#: carry (measured on real sessions: benchmarks/memory_benchmark.py).
BYTES_PER_KEY_BYTE = 4
#: And for each message besides: its node, its share of the steps' carried weights.
BYTES_PER_MESSAGE = 600


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


@dataclass(frozen=True)
class Previous:
    """What one request left for the next request of its conversation."""

    #: How the messages were read and decided: the policy, the wire format, and why user
    #: messages were read as tool output (:attr:`.Conversation.text_protocol`).
    reading: tuple[Identity, str, str | None]
    #: The exact copy each message is known by (:class:`.MessageMemo`).
    keys: tuple[bytes, ...]
    #: The conversation after the steps (before the loop guard, which runs on every
    #: request).
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
        self._by_opening: OrderedDict[bytes, tuple[Previous, int]] = OrderedDict()
        #: Requests that were worked on in their new part only.
        self.continued = 0
        #: Bytes the remembered requests hold (an estimate, :func:`held_bytes`).
        self.bytes = 0

    def resume(
        self,
        conversation: Conversation,
        keys: tuple[bytes, ...],
        reading: tuple[Identity, str, str | None],
        decisions: int,
    ) -> tuple[Previous, Resume, int] | None:
        """The previous request ``conversation`` continues, cut to the turns both share as
        they were, what the steps may take from it, and the turns the previous request
        had; ``None`` when no turn is shared. ``conversation`` holds the messages as parsed
        (pairing found nothing to repair).

        Agents move their cache markers forward on every request, so the previous
        request's last messages often come back changed: the turns before the first
        changed message are still shared."""
        with self._lock:
            found = self._by_opening.get(keys[0]) if keys else None
        previous = found[0] if found is not None else None
        if previous is None or previous.reading != reading or previous.decisions != decisions:
            return None
        nodes = conversation.nodes
        if len(nodes) != len(keys):
            return None
        size = len(previous.keys)
        shared = 0
        limit = min(size, len(keys))
        while shared < limit and keys[shared] == previous.keys[shared]:
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
        return previous, Resume(start, from_turn, previous.carried), turns

    def run(
        self,
        conversation: Conversation,
        keys: tuple[bytes, ...],
        *,
        reading: tuple[Identity, str, str | None],
        decisions: int,
        steps: Sequence[tuple[str, str]],
        run_step: Callable[[tuple[str, str], Resume], Run],
    ) -> list[Run] | None:
        """Run ``steps`` on the new turns only, when ``conversation`` continues the
        previous request of its conversation as it was: their contexts, each holding the
        previous request's actions before its own. ``None``, and the conversation as it
        came, when it does not or a step cannot."""
        found = self.resume(conversation, keys, reading, decisions)
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

    def remember(self, previous: Previous) -> None:
        if not previous.keys or len(previous.keys) != len(previous.nodes):
            return  # messages and nodes must match one to one
        opening = previous.keys[0]
        with self._lock:
            earlier = self._by_opening.get(opening)
        kept = detached(previous, earlier[0] if earlier is not None else None)
        size = held_bytes(kept)
        with self._lock:
            replaced = self._by_opening.pop(opening, None)
            if replaced is not None:
                self.bytes -= replaced[1]
            self._by_opening[opening] = (kept, size)
            self.bytes += size
            while len(self._by_opening) > MAX_CONVERSATIONS:
                self.bytes -= self._by_opening.popitem(last=False)[1][1]

    def clear(self) -> list[bytes]:
        """Forget every conversation: the next request of each is processed in full, as
        by a pipeline that never saw it. Returns the exact copies of the messages that
        were remembered (what the message cache knows them by)."""
        with self._lock:
            remembered, self._by_opening = self._by_opening, OrderedDict()
            self.bytes = 0
        return [key for previous, _ in remembered.values() for key in previous.keys]


def held_bytes(previous: Previous) -> int:
    """An estimate of the memory ``previous`` keeps alive, from the sizes of its messages'
    exact copies (known already: no object is walked)."""
    copies = sum(map(len, previous.keys))
    return copies * BYTES_PER_KEY_BYTE + len(previous.nodes) * BYTES_PER_MESSAGE


def detached(previous: Previous, earlier: Previous | None = None) -> Previous:
    """``previous`` holding none of its request's wire messages, to be remembered: a node
    names the message it stands for (:attr:`.Node.raw`), and keeping it would keep the
    whole parsed request alive until the conversation's next request, which puts each
    node in place of its own message (:meth:`.Node.in_place_of`) anyway. Nodes of
    ``earlier`` (the conversation's request before) that stand for the same content at
    the same place are reused, so a request that continued costs one node per new
    message."""
    old = earlier.nodes if earlier is not None else ()
    made: dict[int, Node] = {}
    nodes = []
    for i, node in enumerate(previous.nodes):
        kept = old[i] if i < len(old) else None
        if kept is None or not _alike(kept, node):
            kept = _without_raw(node)
        made[id(node)] = kept
        nodes.append(kept)
    carried = {step: _detached_carry(carry, made) for step, carry in previous.carried.items()}
    return replace(previous, nodes=tuple(nodes), carried=carried)


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


def _detached_carry(carry: Carry, made: Mapping[int, Node]) -> Carry:
    """``carry`` with the nodes it holds detached (``made``: those already detached, by
    the id of the node they stand for). A step's carry is its own named tuple
    (:class:`~middleware.steps.microcompact.schedule.Carried` keeps the conversation as
    the step found it): its fields that are tuples of nodes are the ones replaced."""
    fields: tuple[str, ...] = getattr(carry, "_fields", ())
    changes: dict[str, tuple[Node, ...]] = {}
    for name in fields:
        value = getattr(carry, name)
        if isinstance(value, tuple) and value and isinstance(value[0], Node):
            changes[name] = tuple(made.get(id(node)) or _without_raw(node) for node in value)
    if not changes:
        return carry
    replaced: Carry = getattr(carry, "_replace")(**changes)  # noqa: B009 (a named tuple's)
    return replaced


def _cut(previous: Previous, node: int) -> Previous:
    """``previous`` as if it had ended before ``node`` (where a turn opens)."""
    return Previous(
        previous.reading,
        previous.keys[:node],
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
