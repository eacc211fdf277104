"""Where a preview's head and tail end: sizes counted in characters or UTF-8 bytes, cuts
never inside a character, and on line breaks where the policy says so.
"""

from __future__ import annotations

from typing import Literal

#: What a preview's sizes count.
Unit = Literal["chars", "bytes"]


def head_of(text: str, size: int, unit: Unit, line_breaks: bool) -> str:
    """The start of ``text`` that fits in ``size`` units; with ``line_breaks``, cut back to
    its last line break if that keeps at least half of it."""
    end = _prefix_length(text, size, unit)
    if end >= len(text):
        return text
    head = text[:end]
    if line_breaks:
        cut = head.rfind("\n")
        if cut >= 0 and cut + 1 > end // 2:
            head = head[: cut + 1]
    return head


def tail_of(text: str, size: int, unit: Unit, line_breaks: bool, head_length: int) -> str:
    """The end of ``text`` that fits in ``size`` units and starts after the first
    ``head_length`` characters; with ``line_breaks``, started at a line break if that
    drops at most half of it."""
    if size == 0:
        return ""
    start = len(text) - _suffix_length(text, size, unit)
    start = max(start, head_length)
    if start >= len(text):
        return ""
    if line_breaks and start > 0 and text[start - 1] != "\n":
        newline = text.find("\n", start)
        if newline != -1 and newline - start < (len(text) - start) // 2:
            start = newline + 1
    return text[start:]


def _prefix_length(text: str, size: int, unit: str) -> int:
    """How many characters of ``text`` fit in ``size`` units from the start."""
    if unit == "chars":
        return min(size, len(text))
    used = 0
    for i, ch in enumerate(text):
        used += _utf8_len(ch)
        if used > size:
            return i
    return len(text)


def _suffix_length(text: str, size: int, unit: str) -> int:
    """How many characters of ``text`` fit in ``size`` units from the end."""
    if unit == "chars":
        return min(size, len(text))
    used = 0
    for i, ch in enumerate(reversed(text)):
        used += _utf8_len(ch)
        if used > size:
            return i
    return len(text)


def _utf8_len(ch: str) -> int:
    code = ord(ch)
    if code < 0x80:
        return 1
    if code < 0x800:
        return 2
    return 3 if code < 0x10000 else 4  # lone surrogates travel as 3 bytes
