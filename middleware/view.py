"""The conversation view: one neutral model over the providers' wire formats.

A codec (``middleware.formats``) parses a wire history into a :class:`Conversation` of
immutable :class:`Node` objects, one per wire message or item. Steps never touch wire
dicts: they replace nodes through the conversation's edit methods. When the history is
written back, every node that no step replaced is emitted as the very object that came in,
so untouched messages keep their unknown fields, ``cache_control`` markers, thinking blocks
and images, byte for byte, and the input is never mutated.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import is_not
from typing import Any, Literal, NamedTuple, TypeAlias, get_args

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]

#: Content-part types that carry plain text, across the wire formats that type their parts.
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


@dataclass(frozen=True)
class ToolCall:
    """A tool call made by the model: an Anthropic ``tool_use`` block, an OpenAI
    ``tool_calls`` entry or a Responses ``function_call`` item."""

    id: str
    name: str
    #: The arguments as the wire carries them: a dict (Anthropic) or a JSON string (OpenAI).
    arguments: Any
    #: The original wire block; ``None`` when a step created the call.
    raw: Any = None
    #: Nested too deep to read (:mod:`middleware.formats.structure`): ``arguments`` is a
    #: cut copy, and the block is written as ``raw`` (its id and name aside).
    sealed: bool = False

    @property
    def decoded_arguments(self) -> Any:
        """The arguments as a value: an OpenAI call's JSON string read (``None`` when it is
        not JSON). Worked out once per call."""
        if isinstance(self.arguments, str):
            if "_decoded" not in self.__dict__:
                try:
                    self.__dict__["_decoded"] = json.loads(self.arguments)
                except ValueError:
                    self.__dict__["_decoded"] = None
            return self.__dict__["_decoded"]
        return self.arguments

    @property
    def canonical_arguments(self) -> str:
        """The arguments as JSON with sorted keys (a string that is not JSON as it is), so
        two calls with the same arguments compare equal however the wire wrote them.
        Worked out once per call (kept beside the fields, as :attr:`Node.calls`)."""
        found: str | None = self.__dict__.get("_canonical")
        if found is None:
            arguments = self.arguments
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    found = self.__dict__["_canonical"] = self.arguments
                    return found
            found = self.__dict__["_canonical"] = json.dumps(
                arguments, sort_keys=True, ensure_ascii=False, default=str
            )
        return found


@dataclass(frozen=True)
class ToolResult:
    """A tool result: an Anthropic ``tool_result`` block, an OpenAI ``role: tool`` message,
    a Responses ``function_call_output`` item, or a user message that the policy's text
    protocol rule marks as tool output (``text_protocol=True``, no call id)."""

    call_id: str
    #: The wire content: a string, or a tuple of content parts (text, images, ...).
    content: str | tuple[Any, ...]
    is_error: bool = False
    raw: Any = None
    text_protocol: bool = False
    #: Tool name for text-protocol outputs (from the rule); structured results take the
    #: name of the call they answer.
    tool_name: str | None = None
    #: The full text before a step of this ``process()`` call cut it (the budget step
    #: sets it when it spills), so later steps can work from the original. Never written
    #: to the wire.
    original: str | None = None
    #: Nested too deep to read (:mod:`middleware.formats.structure`): ``content`` is a
    #: cut copy, and the block is written as ``raw`` (its call id and error flag aside).
    #: Steps leave its content alone.
    sealed: bool = False

    @property
    def text(self) -> str:
        """All text of the result, one line break between text blocks (so a spill file
        keeps where one block ended); non-text parts (images, files) count for nothing."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part["text"] for part in self.content if is_text_part(part))

    @property
    def chars(self) -> int:
        """``len(self.text)``, worked out once (a result of text parts joins them)."""
        found: int | None = self.__dict__.get("_chars")
        if found is None:
            found = self.__dict__["_chars"] = len(self.text)
        return found

    @property
    def has_non_text(self) -> bool:
        """Whether the result carries parts other than text (images, documents, ...)."""
        return not isinstance(self.content, str) and any(not is_text_part(p) for p in self.content)

    def with_text(self, text: str, *, original: str | None = None) -> ToolResult:
        """Return a copy whose text is ``text`` and whose non-text parts are kept in place
        (with ``original``: the text it was cut from, see :attr:`original`).

        For block content the first text part takes the new text (keeping its other keys,
        such as ``cache_control``) and the other text parts are dropped; with no text part,
        a new one of the format's usual type is put first.
        """
        if isinstance(self.content, str):
            return self._with(text, original)
        parts: list[Any] = []
        placed = False
        for part in self.content:
            if is_text_part(part):
                if not placed:
                    parts.append({**part, "text": text})
                    placed = True
            else:
                parts.append(part)
        if not placed:
            parts.insert(0, {"type": _text_type_for(self.content), "text": text})
        return self._with(tuple(parts), original)

    def _with(self, content: str | tuple[Any, ...], original: str | None) -> ToolResult:
        # The constructor, not dataclasses.replace: every request rewrites many results.
        return ToolResult(
            self.call_id,
            content,
            self.is_error,
            self.raw,
            self.text_protocol,
            self.tool_name,
            self.original if original is None else original,
            self.sealed,
        )


@dataclass(frozen=True)
class Opaque:
    """A content block no step looks into (text, image, thinking, server tool blocks...)."""

    raw: Any


Block: TypeAlias = ToolCall | ToolResult | Opaque


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


class CallSite(NamedTuple):
    """Where a tool call sits: node and block index, and the assistant turn that made it.

    Sites are named tuples, not dataclasses: every request builds one per call and result
    of the whole history, and a tuple is made several times faster."""

    call: ToolCall
    node: int
    block: int
    turn: int


class ResultSite(NamedTuple):
    """Where a tool result sits and what it answers.

    ``call`` is the call this result is paired with under block-scoped pairing (the calls
    of one assistant turn claim results up to the next assistant turn, first result per id
    wins), or ``None`` for an orphan or a duplicate. ``turn`` is the assistant turn it
    answers and ``age`` the number of assistant turns after that one.
    """

    result: ToolResult
    node: int
    block: int
    call: CallSite | None
    turn: int | None
    age: int | None
    tool_name: str | None


@dataclass(frozen=True)
class ConversationIndex:
    """Every tool call and result of a conversation, with pairing, turns and ages."""

    calls: tuple[CallSite, ...]
    results: tuple[ResultSite, ...]
    #: Assistant-turn ordinal of each node (the turn of the latest assistant node at or
    #: before it; ``-1`` before the first assistant node).
    node_turns: tuple[int, ...]
    turn_count: int

    def unanswered(self) -> tuple[CallSite, ...]:
        """Calls that no result answers under block-scoped pairing."""
        answered = {id(r.call) for r in self.results if r.call is not None}
        return tuple(c for c in self.calls if id(c) not in answered)


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


def is_text_part(part: Any) -> bool:
    return (
        isinstance(part, dict)
        and part.get("type") in TEXT_PART_TYPES
        and isinstance(part.get("text"), str)
    )


def _text_type_for(parts: tuple[Any, ...]) -> str:
    types = {p.get("type") for p in parts if isinstance(p, dict)}
    return "input_text" if types & {"input_image", "input_file"} else "text"


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
        """Raise ``TypeError`` if a step left something a codec cannot write: an object that
        is not a node or block, or a field of the wrong type (a result's content must be a
        string or a tuple of JSON-object parts, ids and names strings, flags booleans).

        Only created or changed nodes are inspected (parsed nodes are known good); given
        ``since`` (a :meth:`checkpoint` taken before the step ran, checked then), only the
        nodes and blocks that are not in it. Returns those nodes, with their positions.
        """
        if not isinstance(self.nodes, list):
            raise TypeError(f"conversation.nodes is a {type(self.nodes).__name__}, not a list")
        # A step mostly replaces a node by an edited copy at the same place: a node or block
        # that is the one at its position in ``since`` is known without building sets, and
        # the positions where another one stands are found without a Python loop.
        aligned = len(since) == len(self.nodes)
        known = _Known(since)
        new: list[tuple[int, Node]] = []
        if since and aligned:
            moved = compress(range(len(since)), map(is_not, self.nodes, since))
            candidates: Iterator[tuple[int, Any]] = ((i, self.nodes[i]) for i in moved)
        else:
            candidates = enumerate(self.nodes)
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

    # -- queries -----------------------------------------------------------------------

    def index(self, start: int = 0, first_turn: int = 0) -> ConversationIndex:
        """Pair results with calls (block-scoped) and compute turns and ages.

        From ``start`` on only, when the node there opens turn ``first_turn`` (an
        assistant node after one that is not): results never answer a call of an earlier
        turn, so those nodes pair among themselves. ``node_turns`` then covers them only;
        ``turn_count`` and ages count every turn.
        """
        node_turns: list[int] = []
        calls: list[CallSite] = []
        # The calls of each turn not answered yet, by id, in call order (first result for
        # an id claims the first such call): one lookup per result, whatever the turn size.
        waiting: dict[tuple[int, str], deque[CallSite]] = {}
        turn = first_turn - 1
        previous_role: str | None = None
        nodes = self.nodes
        for ni in range(start, len(nodes)):
            node = nodes[ni]
            if node.role == "assistant" and previous_role != "assistant":
                turn += 1
            node_turns.append(turn)
            previous_role = node.role
            if not node.calls:
                continue
            for bi, block in enumerate(node.blocks):
                if isinstance(block, ToolCall):
                    site = CallSite(block, ni, bi, turn)
                    calls.append(site)
                    queue = waiting.get((turn, block.id))
                    if queue is None:
                        waiting[(turn, block.id)] = deque((site,))
                    else:
                        queue.append(site)
        turn_count = turn + 1

        results: list[ResultSite] = []
        for ni in range(start, len(nodes)):
            node = nodes[ni]
            if node.role == "assistant" or not node.results:
                continue
            node_turn = node_turns[ni - start]
            for bi, block in enumerate(node.blocks):
                if not isinstance(block, ToolResult):
                    continue
                if block.text_protocol:
                    answered = node_turn if node_turn >= 0 else None
                    results.append(
                        ResultSite(
                            block,
                            ni,
                            bi,
                            None,
                            answered,
                            None if answered is None else turn_count - 1 - answered,
                            block.tool_name,
                        )
                    )
                    continue
                match = None
                if block.call_id:
                    queue = waiting.get((node_turn, block.call_id))
                    match = queue.popleft() if queue else None
                if match is not None:
                    results.append(
                        ResultSite(
                            block,
                            ni,
                            bi,
                            match,
                            match.turn,
                            turn_count - 1 - match.turn,
                            match.call.name,
                        )
                    )
                else:
                    results.append(ResultSite(block, ni, bi, None, None, None, None))
        return ConversationIndex(tuple(calls), tuple(results), tuple(node_turns), turn_count)


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
