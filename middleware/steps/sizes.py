"""Character counts of a conversation, shared by the steps that weigh history size."""

from __future__ import annotations

from collections.abc import Sequence

from middleware.view import Node


def value_chars(value: object) -> int:
    """Characters of every string inside a wire value (dicts and lists walked)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(value_chars(v) for v in value.values())
    if isinstance(value, list):
        return sum(value_chars(v) for v in value)
    return 0


def node_chars(node: Node) -> int:
    """Characters a node puts on the wire (a created node: its results' text)."""
    if node.raw is not None:
        return value_chars(node.raw)
    return sum(len(b.text) for b in node.results)


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


def offsets(sizes: Sequence[int]) -> list[int]:
    """Characters of history before each node."""
    out, running = [], 0
    for size in sizes:
        out.append(running)
        running += size
    return out
