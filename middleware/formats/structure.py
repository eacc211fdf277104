"""The structural guard: every message is plain JSON of bounded depth before a codec reads it.

Every codec runs :func:`check_message` on each message at parse time (``Codec.parse``), and
``check_history`` parses through the same codecs, so a malformed value is refused once, in
one place, with a :class:`HistoryError` naming the message and a JSON path. Everything
downstream (sizes, digests for generated ids, the report's JSON) may then recurse over a
message without hitting Python's recursion limit: the walk here is iterative, so even a
value nested a hundred thousand levels deep is found in linear time.

Depth alone costs only the block that has it (:class:`TooDeep`): the codec reads the
message from :func:`cut_deep`'s copy, whose too-deep values are replaced by a note, and
the blocks they sat in are *sealed*: sent exactly as they came, never read or changed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from middleware.errors import HistoryError

#: Deepest nesting of objects and arrays in one message, the message itself being level 1
#: (``content[0].input`` is level 3). serde_json, which many API servers parse requests
#: with, stops at 128 by default; at two or three Python frames per level, later recursive
#: code stays far below the interpreter's limit of 1,000.
MAX_DEPTH = 128

#: Path segments shown in an error before the middle is elided, and key characters shown.
_PATH_HEAD = 6
_PATH_TAIL = 2
_KEY_CHARS = 40
_SURROGATE = re.compile("[\ud800-\udfff]")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_Frame = tuple[Iterator[tuple[Any, Any]], bool]  # (items, holds an object's members)

#: What stands for a too-deep value in the copy a codec reads (never sent).
DEEP_NOTE = f"[nested deeper than {MAX_DEPTH} levels: sent as it came, not read]"


class TooDeep(HistoryError):
    """A message nested deeper than :data:`MAX_DEPTH` levels (and nothing else wrong up
    to there): a codec seals what holds the deep value rather than refusing the message."""

    def __init__(self, reason: str, index: int, path: list[Any]) -> None:
        super().__init__(reason, index=index)
        self.path = path


def check_message(message: dict[str, Any], index: int) -> None:
    """Raise :class:`HistoryError` unless ``message`` is a JSON object of at most
    :data:`MAX_DEPTH` levels: string keys; values that are strings (valid Unicode),
    finite numbers, booleans, null, lists or such objects."""
    keys: list[Any] = []  # keys[i]: where stack[i + 1] sits in stack[i]'s container
    stack: list[_Frame] = [(iter(message.items()), True)]
    while stack:
        items, members = stack[-1]
        for key, value in items:
            if members and not isinstance(key, str):
                raise _error(
                    index,
                    keys,
                    f"key {key!r} ({type(key).__name__}) is not a string; JSON object keys "
                    "are strings",
                )
            kind = type(value)
            if kind is str:
                if not value.isascii() and _SURROGATE.search(value):
                    raise _error(index, [*keys, key], _surrogate_reason(value))
                continue
            if kind is int or kind is bool or value is None:
                continue
            if kind is float:
                if not math.isfinite(value):
                    raise _error(index, [*keys, key], _non_finite(value))
                continue
            container = value
            if kind is not dict and kind is not list:
                container = _subclass_container(value, index, [*keys, key])
                if container is None:
                    continue
            if len(stack) >= MAX_DEPTH:
                path = [*keys, key]
                raise TooDeep(
                    f"{json_path(path)}: nested deeper than {MAX_DEPTH} levels; send such "
                    "data as a JSON string or flatten it",
                    index,
                    path,
                )
            keys.append(key)
            if isinstance(container, dict):
                stack.append((iter(container.items()), True))
            else:
                stack.append((enumerate(container), False))
            break
        else:
            stack.pop()
            if keys:
                keys.pop()


def cut_deep(message: dict[str, Any]) -> tuple[dict[str, Any], dict[int, Any]]:
    """A copy of ``message`` in which every object or array deeper than :data:`MAX_DEPTH`
    levels is :data:`DEEP_NOTE`, and, by ``id``, the original of each container copied on
    the way to one (the rest is shared, not copied). The copy is what a codec reads; the
    originals are what is sent."""
    originals: dict[int, Any] = {}

    def cut(value: Any, level: int) -> Any:
        if isinstance(value, dict):
            if level > MAX_DEPTH:
                return DEEP_NOTE
            members = {key: cut(item, level + 1) for key, item in value.items()}
            if all(members[key] is item for key, item in value.items()):
                return value
            originals[id(members)] = value
            return members
        if isinstance(value, list):
            if level > MAX_DEPTH:
                return DEEP_NOTE
            items = [cut(item, level + 1) for item in value]
            if all(a is b for a, b in zip(items, value, strict=True)):
                return value
            originals[id(items)] = value
            return items
        return value

    out = cut(message, 1)
    return out, originals


def _subclass_container(
    value: Any, index: int, path: list[Any]
) -> dict[Any, Any] | list[Any] | None:
    """For a value of no exact JSON type: ``None`` for a valid subclass of a scalar type,
    the value itself for a subclass of dict or list; anything else is refused."""
    if isinstance(value, (bool, int)):
        return None
    if isinstance(value, str):
        if not value.isascii() and _SURROGATE.search(value):
            raise _error(index, path, _surrogate_reason(value))
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _error(index, path, _non_finite(value))
        return None
    if isinstance(value, (dict, list)):
        return value
    hint = " (use a list)" if isinstance(value, tuple) else ""
    raise _error(index, path, f"a {type(value).__name__} is not a JSON value{hint}")


def _non_finite(value: float) -> str:
    return f"{value!r} is not a JSON number (JSON has no NaN or infinity)"


def _surrogate_reason(value: str) -> str:
    match = _SURROGATE.search(value)
    code = ord(match.group()) if match else 0
    return f"the string has an unpaired surrogate (U+{code:04X}): it is not valid Unicode"


def _error(index: int, path: list[Any], reason: str) -> HistoryError:
    return HistoryError(f"{json_path(path)}: {reason}", index=index)


def json_path(path: list[Any]) -> str:
    """``$.content[0].input`` for the keys ``["content", 0, "input"]``; long paths keep
    their first and last segments, long keys their start."""
    segments = [_segment(key) for key in path]
    if len(segments) > _PATH_HEAD + _PATH_TAIL + 1:
        hidden = len(segments) - _PATH_HEAD - _PATH_TAIL
        segments = [*segments[:_PATH_HEAD], f"…({hidden} more)…", *segments[-_PATH_TAIL:]]
    return "$" + "".join(segments)


def _segment(key: Any) -> str:
    if isinstance(key, int) and not isinstance(key, bool):
        return f"[{key}]"
    text = str(key)
    if len(text) > _KEY_CHARS:
        text = text[:_KEY_CHARS] + "…"
    return f".{text}" if _IDENTIFIER.match(text) else f"[{text!r}]"
