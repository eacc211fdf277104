"""What a session keeps of a request for the next one, and how the next one fills it again.

A remembered request (:class:`~middleware.session.previous.Previous`) must not keep its
request's messages alive: a message the steps left as it came is kept :class:`Hollow`, one
they changed keeps only what they made (:class:`Stripped`), and the next request that
continues carries the same messages, parsed, from which :func:`filled` takes back the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields, replace
from itertools import chain
from typing import Any, cast

from middleware.session.previous import Carry, Previous
from middleware.view import Block, Node, Opaque, ToolCall, ToolResult, value_chars

#: Bytes a remembered request holds for each message: its mark, its node (hollow when the
#: steps left it as it came), its share of the steps' carried weights and actions.
BYTES_PER_MESSAGE = 600
#: And for each character of the messages the steps changed (a preview, a summary and the
#: blocks beside them), parsed: measured on real sessions (tests/session/test_memory.py).
BYTES_PER_CHANGED_CHAR = 2


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
