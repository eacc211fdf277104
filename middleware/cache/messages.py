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
from collections.abc import Callable, Collection, Hashable, Sequence
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
        #: The entries :meth:`known` found or :meth:`parse` made, by key: the same
        #: message is not looked up again in this call.
        self._found: dict[bytes, dict[Hashable, Node]] = {}

    def key(self, message: Any) -> bytes | None:
        """The exact copy ``message`` is known by, or ``None`` when it cannot be kept
        (caching off, too large, or a value pickle refuses)."""
        ident = id(message)
        if ident in self._keys:
            return self._keys[ident]
        key: bytes | None = None
        if self.cache.enabled and type(message) is dict:
            try:
                key = exact_copy(message)
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

    def known(self, messages: Sequence[Any]) -> list[bool]:
        """Whether each of ``messages`` was parsed before: it is then plain JSON data as
        is. One pass for the whole history (every request asks it of every message), with
        one lookup in the cache."""
        keys = [self.key(message) for message in messages]
        entries = self.cache.get_many([("message", key) for key in keys if key is not None])
        known: list[bool] = []
        at = 0
        for key in keys:
            if key is None:
                known.append(False)
                continue
            nodes = entries[at]
            at += 1
            if nodes is not None:
                self._found[key] = nodes
            known.append(nodes is not None)
        return known

    def parse(
        self,
        codec: str,
        message: dict[str, Any],
        index: int,
        read: Callable[[dict[str, Any], int], Node],
    ) -> Node:
        """The node of ``message`` at ``index``: reused when an equal message was parsed
        before, else checked and parsed by ``read`` (from a private copy, which is what is
        kept)."""
        key = self.key(message)
        if key is None:
            return read(message, index)
        # One entry per message, holding its node per wire format it was read as (and
        # per way of reading it again, :meth:`variant`).
        nodes = self._found.get(key)
        if nodes is None:
            nodes = self.cache.get(("message", key))
        found = None if nodes is None else nodes.get(codec)
        if found is None:
            private = pickle.loads(key)  # our own bytes, from this process
            parsed = read(private, index)
            found = Node(
                parsed.role, parsed.blocks, meta=parsed.meta, raw_chars=value_chars(private)
            )
            if nodes is None:
                nodes = {codec: found}
                self._store(key, nodes)
            else:
                nodes[codec] = found
        self._found[key] = nodes
        return found.rebound(message, index, found.raw_chars)

    def variant(
        self,
        codec: str,
        how: Hashable,
        message: Any,
        index: int,
        read: Callable[[dict[str, Any], Node], Node],
    ) -> Node | None:
        """The node ``read(private copy, parsed node)`` gives for ``message`` (which
        :meth:`parse` read as ``codec`` in this call), kept with the message under ``how``
        (what else it depends on); ``None`` when the message is not kept."""
        key = self._keys.get(id(message))
        nodes = None if key is None else self._found.get(key)
        if key is None or nodes is None or codec not in nodes:
            return None
        found = nodes.get((codec, how))
        if found is None:
            found = read(pickle.loads(key), nodes[codec])
            nodes[(codec, how)] = found
            self._store(key, nodes)  # counted again with the texts it now holds
        return found.rebound(message, index, found.raw_chars)

    def _store(self, key: bytes, nodes: dict[Hashable, Node]) -> None:
        """Keep ``nodes`` for the message ``key`` is the copy of: counted as the pickle,
        the parsed structure (about as large; its results' texts are part of it), and
        every result text the entry holds (what derived data of results is keyed by; a
        :meth:`variant` was read from a copy of its own), each text once."""
        texts: dict[int, str] = {}
        parsed_chars = 0
        for how, node in nodes.items():
            for block in node.blocks:
                if isinstance(block, ToolResult):
                    text = block.text
                    texts.setdefault(id(text), text)
                    if isinstance(how, str):  # parsed as a wire format
                        parsed_chars += len(text)
        rest = max(len(key) - parsed_chars, 0)
        self.cache.put(("message", key), nodes, len(key) + rest, tuple(texts.values()))


def exact_copy(message: Any) -> bytes:
    """The exact copy a message is known by (its pickle), as :class:`MessageMemo` takes it.

    :raises Exception: what pickle raises for a value it refuses."""
    return pickle.dumps(message, _PROTOCOL)


def message_mark(key: bytes) -> int:
    """What a session remembers a message by between requests, in place of its exact copy
    (which is as large as the message): the copy's length and hash. The hash is the
    process's keyed SipHash, which the copy caches once the cache has looked it up, so
    marking costs nothing. Two different messages of the same length agree on it once in
    2**64 (the hash is keyed per process unless ``PYTHONHASHSEED`` is set: only the client
    whose conversation it is could then try to make two agree)."""
    return (len(key) << 64) | (hash(key) & 0xFFFF_FFFF_FFFF_FFFF)


def forget_messages(cache: DerivedCache, marks: Collection[int]) -> int:
    """Drop what ``cache`` keeps of the messages known by ``marks`` (an ended session's,
    :func:`message_mark`): their parsed nodes, and every entry holding the text of one of
    their results (its digest, preview, summary...). Another session that has the same
    messages parses them again. Returns the bytes released."""
    wanted = frozenset(marks)
    texts: list[str] = []
    entries = [
        entry
        for entry in cache.keys_of("message")
        if isinstance(key := entry[1], bytes) and message_mark(key) in wanted
    ]
    for nodes in cache.peek_many(entries):
        if nodes is None:
            continue
        for node in nodes.values():
            texts.extend(block.text for block in node.results)
    return cache.discard(entries, texts)
