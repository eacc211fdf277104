"""Parsed messages reused across requests: a history that grew by one turn is parsed (and
checked) only in its new part.

A message is recognised by an exact copy of it (its pickle, which tells ``1`` from ``1.0``
and ``True``, keeps key order and names every type), never by ``==`` or a digest: a hit is
a message that parses to exactly the same node. The stored node is parsed from that copy,
so nothing the caller mutates later can reach it; each request gets the node rebound to its
own message object and position.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any

from middleware.cache.lru import DerivedCache
from middleware.view import Node, ToolResult, value_chars

#: A pickle of plain JSON data loads the same in any process of the same Python.
_PROTOCOL = 5


class MessageMemo:
    """The parsed-message side of a :class:`DerivedCache`, for one ``process()`` call."""

    def __init__(self, cache: DerivedCache, max_message_bytes: int) -> None:
        self.cache = cache
        self.max_message_bytes = max_message_bytes
        self._keys: dict[int, bytes | None] = {}
        self._held: list[Any] = []  # keeps the ids of _keys meaning the same objects
        #: The entries :meth:`known` found, by key: :meth:`parse` of the same message
        #: does not look them up again.
        self._found: dict[bytes, dict[str, Node]] = {}

    def key(self, message: Any) -> bytes | None:
        """The exact copy ``message`` is known by, or ``None`` when it cannot be kept
        (caching off, too large, or a value pickle refuses)."""
        ident = id(message)
        if ident in self._keys:
            return self._keys[ident]
        key: bytes | None = None
        if self.cache.enabled and type(message) is dict:
            try:
                key = pickle.dumps(message, _PROTOCOL)
            except Exception:  # unpicklable or too deep: parsed the ordinary way
                key = None
            if key is not None and len(key) > self.max_message_bytes:
                key = None
        self._keys[ident] = key
        self._held.append(message)
        return key

    def keys(self, messages: Sequence[Any]) -> tuple[bytes, ...] | None:
        """The exact copy each of ``messages`` is known by, or ``None`` when one cannot
        be kept."""
        found = []
        for message in messages:
            key = self.key(message)
            if key is None:
                return None
            found.append(key)
        return tuple(found)

    def known(self, message: Any) -> bool:
        """Whether ``message`` was parsed before: it is then plain JSON data as is."""
        key = self.key(message)
        if key is None:
            return False
        nodes = self.cache.get(("message", key))
        if nodes is None:
            return False
        self._found[key] = nodes
        return True

    def parse(
        self,
        codec: str,
        message: dict[str, Any],
        index: int,
        check: Callable[[dict[str, Any], int], None],
        parse: Callable[[dict[str, Any], int], Node],
    ) -> Node:
        """The node of ``message`` at ``index``: reused when an equal message was parsed
        before, else checked and parsed (from a private copy, which is what is kept)."""
        key = self.key(message)
        if key is None:
            check(message, index)
            return parse(message, index)
        # One entry per message, holding its node per wire format it was read as.
        nodes = self._found.get(key)
        if nodes is None:
            nodes = self.cache.get(("message", key))
        found = None if nodes is None else nodes.get(codec)
        if found is None:
            check(message, index)
            private = pickle.loads(key)  # our own bytes, from this process
            parsed = parse(private, index)
            found = Node(
                parsed.role, parsed.blocks, meta=parsed.meta, raw_chars=value_chars(private)
            )
            if nodes is None:
                # The pickle, the parsed structure (about as large), and the results'
                # texts, which the derived data of results is keyed by: counted once.
                texts = tuple(b.text for b in found.blocks if isinstance(b, ToolResult))
                rest = max(len(key) - sum(len(t) for t in texts), 0)
                self.cache.put(("message", key), {codec: found}, len(key) + rest, texts)
            else:
                nodes[codec] = found
        return found.rebound(message, index, found.raw_chars)
