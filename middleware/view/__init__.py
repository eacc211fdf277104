"""The conversation view: one neutral model over the providers' wire formats.

A codec (``middleware.formats``) parses a wire history into a :class:`Conversation` of
immutable :class:`Node` objects, one per wire message or item. Steps never touch wire
dicts: they replace nodes through the conversation's edit methods. When the history is
written back, every node that no step replaced is emitted as the very object that came in,
so untouched messages keep their unknown fields, ``cache_control`` markers, thinking blocks
and images, byte for byte, and the input is never mutated.

Its modules: the blocks (:mod:`.blocks`), the nodes (:mod:`.nodes`), the pairing index
(:mod:`.index`), the checks of what a step left (:mod:`.checks`) and the conversation
(:mod:`.conversation`); the rest of the package imports their names from here.
"""

from __future__ import annotations

from middleware.view.blocks import (
    TEXT_PART_TYPES,
    Block,
    Opaque,
    ToolCall,
    ToolResult,
    is_text_part,
)
from middleware.view.conversation import Conversation
from middleware.view.index import CallSite, ConversationIndex, ResultSite
from middleware.view.nodes import Node, Role, value_chars

__all__ = [
    "TEXT_PART_TYPES",
    "Block",
    "CallSite",
    "Conversation",
    "ConversationIndex",
    "Node",
    "Opaque",
    "ResultSite",
    "Role",
    "ToolCall",
    "ToolResult",
    "is_text_part",
    "value_chars",
]
