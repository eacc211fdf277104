"""The conversation a ``process()`` call works on: its nodes, the edits steps make to them,
and the checks and index every step relies on."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from middleware.view.blocks import Block
from middleware.view.checks import check_nodes
from middleware.view.index import ConversationIndex, index_nodes
from middleware.view.nodes import Node


@dataclass
class Conversation:
    """A mutable sequence of immutable nodes, owned by one ``process()`` call."""

    format: str
    nodes: list[Node]
    #: The input history, kept to hand back unchanged when no step acted.
    source: Sequence[Any] = field(default_factory=list)
    #: Why plain user messages were read as tool output: ``"policy rule"``, the text agent
    #: auto mode recognised, or ``None`` (they were not).
    text_protocol: str | None = None

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def changed(self) -> bool:
        """Whether any step edited the conversation."""
        if len(self.nodes) != len(self.source):
            return True
        return any(n.changed or n.origin != i for i, n in enumerate(self.nodes))

    # -- edits -------------------------------------------------------------------------

    def replace_node(self, index: int, node: Node) -> None:
        self.nodes[index] = node

    def insert_node(self, index: int, node: Node) -> None:
        self.nodes.insert(index, node)

    def delete_node(self, index: int) -> Node:
        return self.nodes.pop(index)

    def replace_block(self, node_index: int, block_index: int, block: Block) -> None:
        """Replace one block of one node (the usual edit of budget and compaction steps)."""
        node = self.nodes[node_index]
        blocks = list(node.blocks)
        blocks[block_index] = block
        self.nodes[node_index] = node.with_blocks(blocks)

    def checkpoint(self) -> tuple[Node, ...]:
        """A snapshot to :meth:`restore` if a step fails half-way (nodes are immutable)."""
        return tuple(self.nodes)

    def restore(self, snapshot: tuple[Node, ...]) -> None:
        self.nodes[:] = snapshot

    def check(self, since: Sequence[Node] = ()) -> list[tuple[int, Node]]:
        """Raise ``TypeError`` if a step left something a codec cannot write
        (:func:`~middleware.view.checks.check_nodes`: only what is not in ``since``, a
        :meth:`checkpoint` taken before the step ran); returns the nodes it inspected,
        with their positions."""
        return check_nodes(self.nodes, since)

    # -- queries -----------------------------------------------------------------------

    def index(self, start: int = 0, first_turn: int = 0) -> ConversationIndex:
        """Pair results with calls (block-scoped) and compute turns and ages
        (:func:`~middleware.view.index.index_nodes`: from ``start`` on only, when the
        node there opens turn ``first_turn``)."""
        return index_nodes(self.nodes, start, first_turn)
