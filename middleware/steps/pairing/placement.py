"""Pairing repair, part 2: lay the nodes of each region out where the format wants them.

Every layout keeps a node that needs no change as the very same object in the same
relative order, so a valid history yields the same node list and is not rewritten.

* OpenAI Chat: an assistant message is followed by one tool message per call. Results
  already adjacent keep their order; results from behind other messages follow them;
  synthetic results come last, in call order; the other messages of the region follow.
* Anthropic: the results of an assistant message are ``tool_result`` blocks at the start of
  the next user message (the one already there, or a new one). Results from later messages
  are moved into it; a message left with no blocks is removed.
* Responses: pairing is by ``call_id`` within the turn's region, so results stay where
  they are; synthetic outputs go right after the turn's items and the outputs adjacent
  to them, before any other item.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from middleware.formats.base import Codec
from middleware.formats.declarations import ResultPlacement
from middleware.report import ActionKind
from middleware.steps.pairing.plan import (
    CallEntry,
    Plan,
    Recorder,
    Region,
    ResultEntry,
    is_paired_result,
)
from middleware.view import Block, Node, ToolResult

#: Builds the synthetic result for an unanswered call.
Synthesize = Callable[[CallEntry], ToolResult]


class Layout:
    """Lays out one conversation from its :class:`Plan`."""

    def __init__(
        self,
        nodes: Sequence[Node],
        plan: Plan,
        codec: Codec,
        synthesize: Synthesize,
        record: Recorder,
    ) -> None:
        self.nodes = nodes
        self.plan = plan
        self.codec = codec
        self.synthesize = synthesize
        self.record = record
        self._first_others: dict[int, int] = {}

    def run(self) -> list[Node]:
        out: list[Node] = []
        lay_out = {
            ResultPlacement.NEXT_MESSAGE: self._next_message,
            ResultPlacement.AFTER_CALL: self._after_call,
            ResultPlacement.AFTER_TURN: self._after_turn,
        }[self.codec.result_placement]
        for region in self.plan.regions:
            out.extend(lay_out(region))
        return out

    # -- helpers -------------------------------------------------------------------------

    def _assistant(self, ni: int) -> Node | None:
        if ni in self.plan.assistant_nodes:
            return self.plan.assistant_nodes[ni]
        return self.nodes[ni]

    def _claimed(self, ni: int) -> list[ResultEntry]:
        entries = [e.result for e in self.plan.calls.get(ni, ()) if e.result is not None]
        return sorted(entries, key=lambda r: (r.node, r.block))

    def _synthetics(self, ni: int) -> list[ToolResult]:
        out = []
        for entry in self.plan.calls.get(ni, ()):
            if entry.result is None:
                result = self.synthesize(entry)
                self.record(
                    ActionKind.SYNTHETIC_RESULT,
                    tool_call_id=entry.call.id,
                    tool_name=entry.call.name,
                    message_index=self.nodes[entry.node].origin,
                    chars_after=len(result.text),
                    reason="no result answers this call",
                )
                out.append(result)
        return out

    def _relocated(self, entry: ResultEntry, why: str) -> None:
        text = entry.result.text
        self.record(
            ActionKind.RESULT_RELOCATED,
            tool_call_id=entry.result.call_id,
            tool_name=entry.call.call.name if entry.call else None,
            message_index=self.nodes[entry.node].origin,
            chars_before=len(text),
            chars_after=len(text),
            call_message_index=self.nodes[entry.call.node].origin if entry.call else None,
            reason=why,
        )

    def _result_node(self, entry: ResultEntry) -> Node:
        """The one-result node of ``entry`` (OpenAI, Responses), renamed if needed."""
        node = self.nodes[entry.node]
        return node if entry.result is node.blocks[0] else node.with_blocks([entry.result])

    def _first_other(self, ni: int) -> int:
        """Index of the first block of node ``ni`` that is not a paired result."""
        if ni not in self._first_others:
            blocks = self.nodes[ni].blocks
            self._first_others[ni] = next(
                (i for i, b in enumerate(blocks) if not is_paired_result(b)), len(blocks)
            )
        return self._first_others[ni]

    def _is_result_node(self, node: Node) -> bool:
        return any(is_paired_result(b) for b in node.blocks)

    # -- one message per result, after its call (Chat Completions) -----------------------

    def _after_call(self, region: Region) -> list[Node]:
        adjacent: set[int] = set()
        for ti in region.tail:
            if not self._is_result_node(self.nodes[ti]):
                break
            adjacent.add(ti)
        last = region.assistants[-1] if region.assistants else None
        out: list[Node] = []
        for ni in region.assistants:
            node = self._assistant(ni)
            if node is None:
                continue
            out.append(node)
            for entry in self._claimed(ni):
                if ni != last or entry.node not in adjacent:
                    self._relocated(entry, "moved right after the assistant message")
                out.append(self._result_node(entry))
            out.extend(self.codec.result_node([r]) for r in self._synthetics(ni))
        out.extend(self.nodes[ti] for ti in region.tail if not self._is_result_node(self.nodes[ti]))
        return out

    # -- items after the turn's items (Responses) ------------------------------------------

    def _after_turn(self, region: Region) -> list[Node]:
        out: list[Node] = []
        synthetic: list[Node] = []
        for ni in region.assistants:
            node = self._assistant(ni)
            if node is not None:
                out.append(node)
            synthetic.extend(self.codec.result_node([r]) for r in self._synthetics(ni))
        placed = False
        for ti in region.tail:
            node = self.nodes[ti]
            if self._is_result_node(node):
                entry = self.plan.results[(ti, 0)]
                if entry.fate == "claimed":
                    out.append(self._result_node(entry))
                continue
            if not placed:
                out.extend(synthetic)
                placed = True
            out.append(node)
        if not placed:
            out.extend(synthetic)
        return out

    # -- blocks of the next user message (Anthropic Messages) ------------------------------

    def _next_message(self, region: Region) -> list[Node]:
        out: list[Node] = []
        last = region.assistants[-1] if region.assistants else None
        for ni in region.assistants:
            node = self._assistant(ni)
            if node is not None:
                out.append(node)
            if ni != last and self.plan.calls.get(ni):
                out.append(self.codec.result_node(self._result_blocks(ni, None)))
        answer: int | None = None
        if last is not None and self.plan.calls.get(last):
            first = self.nodes[region.tail[0]] if region.tail else None
            if first is not None and first.role == "user" and not _is_text_protocol(first):
                answer = region.tail[0]
            else:
                out.append(self.codec.result_node(self._result_blocks(last, None)))
        for ti in region.tail:
            node = self.nodes[ti]
            others = [b for b in node.blocks if not is_paired_result(b)]
            if ti == answer and last is not None:
                blocks: list[Block] = [*self._result_blocks(last, ti), *others]
                out.append(node if _same(blocks, node.blocks) else node.with_blocks(blocks))
            elif len(others) == len(node.blocks):
                out.append(node)
            elif others:
                out.append(node.with_blocks(others))
            else:
                self.record(
                    ActionKind.EMPTY_MESSAGE_REMOVED,
                    tool_call_id="",
                    message_index=node.origin,
                    reason="every block of this user message was moved or dropped",
                )
        return out

    def _result_blocks(self, ni: int, answer: int | None) -> list[ToolResult]:
        """The ``tool_result`` blocks answering assistant node ``ni``, for the user message
        ``answer`` (an index in the input) or for a new message (``None``)."""
        blocks: list[ToolResult] = []
        for entry in self._claimed(ni):
            if entry.node != answer:
                self._relocated(entry, "moved into the user message right after its call")
            elif entry.block > self._first_other(entry.node):
                self._relocated(entry, "moved before the message's other blocks")
            blocks.append(entry.result)
        blocks.extend(self._synthetics(ni))
        return blocks


def _is_text_protocol(node: Node) -> bool:
    return any(isinstance(b, ToolResult) and b.text_protocol for b in node.blocks)


def _same(a: Sequence[Block], b: Sequence[Block]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
