"""What a step left in a conversation, checked before a codec writes it: every node a
:class:`~middleware.view.nodes.Node`, every block a call, result or opaque block, every
field of the type the codecs write (:meth:`~middleware.view.Conversation.check`). A step
that breaks this is rolled back and reported, never written half-way."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from itertools import compress
from operator import is_not
from typing import Any, get_args

from middleware.view.blocks import Block, Opaque, ToolCall, ToolResult
from middleware.view.nodes import Node, Role


def check_nodes(nodes: list[Node], since: Sequence[Node] = ()) -> list[tuple[int, Node]]:
    """Raise ``TypeError`` if a step left something a codec cannot write: an object that
    is not a node or block, or a field of the wrong type (a result's content must be a
    string or a tuple of JSON-object parts, ids and names strings, flags booleans).

    Only created or changed nodes are inspected (parsed nodes are known good); given
    ``since`` (a :meth:`~middleware.view.Conversation.checkpoint` taken before the step
    ran, checked then), only the nodes and blocks that are not in it. Returns those
    nodes, with their positions.
    """
    if not isinstance(nodes, list):
        raise TypeError(f"conversation.nodes is a {type(nodes).__name__}, not a list")
    # A step mostly replaces a node by an edited copy at the same place: a node or block
    # that is the one at its position in ``since`` is known without building sets, and
    # the positions where another one stands are found without a Python loop.
    aligned = len(since) == len(nodes)
    known = _Known(since)
    new: list[tuple[int, Node]] = []
    if since and aligned:
        moved = compress(range(len(since)), map(is_not, nodes, since))
        candidates: Iterator[tuple[int, Any]] = ((i, nodes[i]) for i in moved)
    else:
        candidates = enumerate(nodes)
    for i, node in candidates:
        if not isinstance(node, Node):
            raise TypeError(f"conversation.nodes[{i}] is a {type(node).__name__}, not a Node")
        if not since:
            if node.changed or node.raw is None:
                new.append((i, node))
        elif not known.node(node):  # (one at its own place in since is not a candidate)
            new.append((i, node))
    for i, node in new:
        _check_node(node, f"conversation.nodes[{i}]")
        before = since[i].blocks if aligned else ()
        for j, block in enumerate(node.blocks):
            if (j < len(before) and block is before[j]) or known.block(block):
                continue
            _check_block(block, f"conversation.nodes[{i}].blocks[{j}]", known)
    return new


_ROLES = frozenset(get_args(Role))


def _check_node(node: Node, where: str) -> None:
    if node.role not in _ROLES:
        raise TypeError(f"{where}.role is {node.role!r}, not one of {sorted(_ROLES)}")
    if not isinstance(node.blocks, tuple):
        raise TypeError(f"{where}.blocks has type {type(node.blocks).__name__}, expected a tuple")
    _expect(node.raw, (dict, type(None)), f"{where}.raw", "a dict or None")
    if isinstance(node.origin, bool) or not isinstance(node.origin, (int, type(None))):
        raise TypeError(
            f"{where}.origin has type {type(node.origin).__name__}, expected an int or None"
        )
    if not isinstance(node.meta, tuple) or not all(
        isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)
        for pair in node.meta
    ):
        raise TypeError(f"{where}.meta is not a tuple of (name, value) pairs")


def _values(block: Block) -> tuple[Any, ...]:
    """The values of a block that are written to the wire as they are."""
    if isinstance(block, ToolResult):
        return block.content if isinstance(block.content, tuple) else ()
    if isinstance(block, ToolCall):
        return (block.arguments,)
    return (block.raw,)


class _Known:
    """The nodes, blocks and values of the snapshot a step started from, by identity; each
    set is gathered the first time something has to be told from it."""

    def __init__(self, since: Sequence[Node]) -> None:
        self._since = since
        self._nodes: set[int] | None = None
        self._blocks: set[int] | None = None
        self._values: set[int] | None = None

    def node(self, node: Node) -> bool:
        if self._nodes is None:
            self._nodes = {id(n) for n in self._since}
        return id(node) in self._nodes

    def block(self, block: object) -> bool:
        if self._blocks is None:
            self._blocks = {id(b) for n in self._since for b in n.blocks}
        return id(block) in self._blocks

    def value(self, value: object) -> bool:
        """Values a new block took over from a known one (an image part, a call's
        arguments) are as writable as they were: only new ones must be JSON."""
        if self._values is None:
            self._values = {id(v) for n in self._since for b in n.blocks for v in _values(b)}
        return id(value) in self._values


def _check_block(block: object, where: str, known: _Known) -> None:
    if isinstance(block, ToolResult):
        _expect(block.call_id, str, f"{where}.call_id", "a string")
        if isinstance(block.content, tuple):
            for k, part in enumerate(block.content):
                _expect(part, dict, f"{where}.content[{k}]", "a dict (a JSON object)")
                _json(part, f"{where}.content[{k}]", known)
        else:
            _expect(block.content, str, f"{where}.content", "a string or a tuple of dicts")
        _expect(block.is_error, bool, f"{where}.is_error", "a bool")
        _expect(block.text_protocol, bool, f"{where}.text_protocol", "a bool")
        _expect(block.tool_name, (str, type(None)), f"{where}.tool_name", "a string or None")
        _expect(block.original, (str, type(None)), f"{where}.original", "a string or None")
        _expect(block.raw, (dict, type(None)), f"{where}.raw", "a dict or None")
    elif isinstance(block, ToolCall):
        _expect(block.id, str, f"{where}.id", "a string")
        if not isinstance(block.name, str) or not block.name:
            raise TypeError(f"{where}.name is {block.name!r}, not a non-empty string")
        _json(block.arguments, f"{where}.arguments", known)
        _expect(block.raw, (dict, type(None)), f"{where}.raw", "a dict or None")
    elif isinstance(block, Opaque):
        _expect(block.raw, dict, f"{where}.raw", "a dict (a JSON object)")
        _json(block.raw, f"{where}.raw", known)
    else:
        raise TypeError(
            f"{where} is a {type(block).__name__}, not a ToolCall, ToolResult or Opaque"
        )


def _expect(value: object, types: type | tuple[type, ...], where: str, expected: str) -> None:
    if not isinstance(value, types):
        raise TypeError(f"{where} has type {type(value).__name__}, expected {expected}")


def _json(value: object, where: str, known: _Known) -> None:
    if isinstance(value, str) or known.value(value):
        return
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{where} cannot be written as JSON: {exc}") from None
