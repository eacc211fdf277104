"""Character counts of a conversation, shared by the steps that weigh history size."""

from __future__ import annotations

from collections.abc import Sequence

from middleware.formats.base import Codec
from middleware.view import Node, value_chars


def node_chars(node: Node, codec: Codec) -> int:
    """Characters a node puts on the wire: the input's own message when no step changed
    it, else the message the codec writes for it, so that processing the output again
    measures exactly the same sizes (and makes the same decisions)."""
    if node.raw is not None and not node.changed:
        return node.raw_chars if node.raw_chars is not None else value_chars(node.raw)
    return value_chars(codec.render_node(node))


def chars_before_turns(sizes: Sequence[int], node_turns: Sequence[int]) -> dict[int, int]:
    """Characters of history before the first node of each assistant turn (depends only on
    what came before, so it never changes as the conversation grows)."""
    before: dict[int, int] = {}
    running = 0
    for size, turn in zip(sizes, node_turns, strict=True):
        if turn >= 0 and turn not in before:
            before[turn] = running
        running += size
    return before
