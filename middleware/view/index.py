"""Where every tool call and result of a conversation sits, which call each result
answers (block-scoped pairing), and the turns and ages that follow from it: what every
step starts from (:meth:`~middleware.view.Conversation.index`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from middleware.view.blocks import ToolCall, ToolResult
from middleware.view.nodes import Node


class CallSite(NamedTuple):
    """Where a tool call sits: node and block index, and the assistant turn that made it.

    Sites are named tuples, not dataclasses: every request builds one per call and result
    of the whole history, and a tuple is made several times faster."""

    call: ToolCall
    node: int
    block: int
    turn: int


class ResultSite(NamedTuple):
    """Where a tool result sits and what it answers.

    ``call`` is the call this result is paired with under block-scoped pairing (the calls
    of one assistant turn claim results up to the next assistant turn, first result per id
    wins), or ``None`` for an orphan or a duplicate. ``turn`` is the assistant turn it
    answers and ``age`` the number of assistant turns after that one.
    """

    result: ToolResult
    node: int
    block: int
    call: CallSite | None
    turn: int | None
    age: int | None
    tool_name: str | None


@dataclass(frozen=True)
class ConversationIndex:
    """Every tool call and result of a conversation, with pairing, turns and ages."""

    calls: tuple[CallSite, ...]
    results: tuple[ResultSite, ...]
    #: Assistant-turn ordinal of each node (the turn of the latest assistant node at or
    #: before it; ``-1`` before the first assistant node).
    node_turns: tuple[int, ...]
    turn_count: int

    def unanswered(self) -> tuple[CallSite, ...]:
        """Calls that no result answers under block-scoped pairing."""
        answered = {id(r.call) for r in self.results if r.call is not None}
        return tuple(c for c in self.calls if id(c) not in answered)


def index_nodes(nodes: Sequence[Node], start: int = 0, first_turn: int = 0) -> ConversationIndex:
    """Pair results with calls (block-scoped) and compute turns and ages.

    From ``start`` on only, when the node there opens turn ``first_turn`` (an
    assistant node after one that is not): results never answer a call of an earlier
    turn, so those nodes pair among themselves. ``node_turns`` then covers them only;
    ``turn_count`` and ages count every turn.
    """
    node_turns: list[int] = []
    calls: list[CallSite] = []
    # The calls of each turn not answered yet, by id, in call order (first result for
    # an id claims the first such call): one lookup per result, whatever the turn size.
    waiting: dict[tuple[int, str], deque[CallSite]] = {}
    turn = first_turn - 1
    previous_role: str | None = None
    for ni in range(start, len(nodes)):
        node = nodes[ni]
        if node.role == "assistant" and previous_role != "assistant":
            turn += 1
        node_turns.append(turn)
        previous_role = node.role
        if not node.calls:
            continue
        for bi, block in enumerate(node.blocks):
            if isinstance(block, ToolCall):
                site = CallSite(block, ni, bi, turn)
                calls.append(site)
                queue = waiting.get((turn, block.id))
                if queue is None:
                    waiting[(turn, block.id)] = deque((site,))
                else:
                    queue.append(site)
    turn_count = turn + 1

    results: list[ResultSite] = []
    for ni in range(start, len(nodes)):
        node = nodes[ni]
        if node.role == "assistant" or not node.results:
            continue
        node_turn = node_turns[ni - start]
        for bi, block in enumerate(node.blocks):
            if not isinstance(block, ToolResult):
                continue
            if block.text_protocol:
                answered = node_turn if node_turn >= 0 else None
                results.append(
                    ResultSite(
                        block,
                        ni,
                        bi,
                        None,
                        answered,
                        None if answered is None else turn_count - 1 - answered,
                        block.tool_name,
                    )
                )
                continue
            match = None
            if block.call_id:
                queue = waiting.get((node_turn, block.call_id))
                match = queue.popleft() if queue else None
            if match is not None:
                results.append(
                    ResultSite(
                        block,
                        ni,
                        bi,
                        match,
                        match.turn,
                        turn_count - 1 - match.turn,
                        match.call.name,
                    )
                )
            else:
                results.append(ResultSite(block, ni, bi, None, None, None, None))
    return ConversationIndex(tuple(calls), tuple(results), tuple(node_turns), turn_count)
