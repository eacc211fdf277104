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
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from middleware.cache import Identity
from middleware.report import Action, ActionKind, ProblemReport
from middleware.session.previous import Carry, Previous, cut
from middleware.session.remembered import detached, filled, held_bytes
from middleware.view import Conversation, Node

#: Conversations remembered per pipeline: a Claude Code session sends its subagents'
#: requests under the same session as the main conversation's.
MAX_CONVERSATIONS = 8
#: Actions whose ``age`` is counted from the latest turn.
AGED_KINDS = frozenset({ActionKind.TRUNCATED, ActionKind.SUMMARIZED})


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


class Continuations:
    """The last request of each of a pipeline's recent conversations (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: What each conversation's last request left, and the bytes it holds.
        self._by_opening: OrderedDict[int, tuple[Previous, int]] = OrderedDict()
        #: Requests that were worked on in their new part only.
        self.continued = 0
        #: Bytes the remembered requests hold (an estimate, :func:`.held_bytes`).
        self.bytes = 0

    def resume(
        self,
        conversation: Conversation,
        marks: tuple[int, ...],
        reading: tuple[Identity, str, str | None],
        decisions: int,
    ) -> tuple[Previous, Resume, int] | None:
        """The previous request ``conversation`` continues, cut to the turns both share as
        they were and filled from this request's messages (:func:`.filled`), what the steps
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
            previous = cut(previous, start)
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
        the steps left as it came is not kept, see :func:`.detached`)."""
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
