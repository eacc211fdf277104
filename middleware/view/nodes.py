"""A node: one wire message (or Responses item) in neutral form, and what it measures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from middleware.view.blocks import Block, ToolCall, ToolResult

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class Node:
    """One wire message (or Responses item) in neutral form.

    ``blocks`` holds the parts steps can act on; what a format keeps outside them (an
    OpenAI assistant message's text, a Responses message item) stays in ``raw`` and is
    written back untouched.
    """

    role: Role
    blocks: tuple[Block, ...] = ()
    #: The original wire element, or ``None`` for a node a step created.
    raw: Any = None
    #: Position of ``raw`` in the input history; ``None`` for created nodes.
    origin: int | None = None
    #: Set by :meth:`with_blocks`: the codec must render this node instead of reusing ``raw``.
    changed: bool = False
    #: Wire-format specifics a codec needs to render a created node (for example the
    #: Responses item type of a non-tool item). Never inspected by steps.
    meta: tuple[tuple[str, Any], ...] = ()
    #: :func:`value_chars` of ``raw`` when the codec already measured it (a message
    #: parsed before); ``None``: measured when asked.
    raw_chars: int | None = field(default=None, compare=False)

    def with_blocks(self, blocks: Sequence[Block]) -> Node:
        """A changed copy of this node holding ``blocks``."""
        # The constructor, not dataclasses.replace: every edit of every request comes here.
        return Node(
            self.role, tuple(blocks), self.raw, self.origin, True, self.meta, self.raw_chars
        )

    def in_place_of(self, here: Node) -> Node:
        """This node's content, standing for the wire message ``here`` carries (its raw
        object, position and size): a node an earlier request made, put into this one."""
        return self.rebound(here.raw, here.origin, here.raw_chars)

    def rebound(self, raw: Any, origin: int | None, raw_chars: int | None) -> Node:
        """This node's content for the wire message ``raw`` at ``origin``. The copy keeps
        what was worked out of the blocks (:attr:`calls`, :attr:`results`): every request
        rebinds every message parsed before, and nodes are immutable."""
        node: Node = object.__new__(Node)  # the fields as the constructor sets them
        node.__dict__.update(self.__dict__, raw=raw, origin=origin, raw_chars=raw_chars)
        return node

    # Worked out once per node (its blocks never change), kept beside the fields (not
    # functools.cached_property, which takes a lock on every first read before 3.12).
    @property
    def calls(self) -> tuple[ToolCall, ...]:
        found: tuple[ToolCall, ...] | None = self.__dict__.get("_calls")
        if found is None:
            found = self.__dict__["_calls"] = tuple(
                b for b in self.blocks if isinstance(b, ToolCall)
            )
        return found

    @property
    def results(self) -> tuple[ToolResult, ...]:
        found: tuple[ToolResult, ...] | None = self.__dict__.get("_results")
        if found is None:
            found = self.__dict__["_results"] = tuple(
                b for b in self.blocks if isinstance(b, ToolResult)
            )
        return found


def value_chars(value: object) -> int:
    """Characters of every string inside a wire value (dicts, lists and tuples walked,
    without recursion: depth never matters)."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return total
