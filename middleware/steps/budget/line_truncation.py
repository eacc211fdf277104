"""Line-and-byte truncation (pi's ``truncateHead`` / ``truncateTail``).

Two independent limits, whichever is hit first: a number of lines and a number of UTF-8
bytes. Head truncation keeps the first whole lines that fit and never a partial line (when
the first line alone is too big it keeps nothing and says so); tail truncation keeps the
last whole lines, and only when the last line alone is too big keeps the end of that line.
The result reports what was kept so the caller can write the notice the model reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class LineLimits:
    """Lines and UTF-8 bytes an output may keep (``budget.line_limits``)."""

    max_lines: int
    max_bytes: int

    def __post_init__(self) -> None:
        if self.max_lines < 1 or self.max_bytes < 1:
            raise ValueError("line limits must be positive")


@dataclass(frozen=True)
class Truncation:
    """What a truncation kept, in pi's terms (lines are 1-based, counted in the input)."""

    content: str
    truncated: bool
    #: Which limit cut the output: ``"lines"``, ``"bytes"`` or ``None`` when nothing was cut.
    truncated_by: Literal["lines", "bytes"] | None
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    #: First and last input line kept (``0, 0`` when none was).
    first_line: int
    last_line: int
    #: Head: the first line alone is over the byte limit, so nothing was kept.
    first_line_exceeds_limit: bool = False
    #: Tail: only the end of the last line was kept.
    last_line_partial: bool = False


def byte_length(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def truncate_head(text: str, limits: LineLimits) -> Truncation:
    """Keep the first whole lines within both limits."""
    lines = text.split("\n")
    total_bytes = byte_length(text)
    if len(lines) <= limits.max_lines and total_bytes <= limits.max_bytes:
        return _whole(text, len(lines), total_bytes)
    if byte_length(lines[0]) > limits.max_bytes:
        return Truncation("", True, "bytes", len(lines), total_bytes, 0, 0, 0, 0, True)
    kept, used, truncated_by = _take_lines(lines[: limits.max_lines], limits.max_bytes)
    content = "\n".join(kept)
    return Truncation(
        content, True, truncated_by, len(lines), total_bytes, len(kept), used, 1, len(kept)
    )


def truncate_tail(text: str, limits: LineLimits) -> Truncation:
    """Keep the last whole lines within both limits, or the end of a too-long last line."""
    lines = text.split("\n")
    total_bytes = byte_length(text)
    total = len(lines)
    if total <= limits.max_lines and total_bytes <= limits.max_bytes:
        return _whole(text, total, total_bytes)
    kept, used, truncated_by = _take_lines(lines[::-1][: limits.max_lines], limits.max_bytes)
    if not kept:
        end = _byte_suffix(lines[-1], limits.max_bytes)
        return Truncation(
            end,
            True,
            "bytes",
            total,
            total_bytes,
            1,
            byte_length(end),
            total,
            total,
            last_line_partial=True,
        )
    kept.reverse()
    first = total - len(kept) + 1
    return Truncation(
        "\n".join(kept), True, truncated_by, total, total_bytes, len(kept), used, first, total
    )


def clip_line(line: str, max_chars: int, suffix: str) -> tuple[str, bool]:
    """``line`` cut to ``max_chars`` characters plus ``suffix`` (pi's grep match lines)."""
    if len(line) <= max_chars:
        return line, False
    return line[:max_chars] + suffix, True


def format_size(n_bytes: int) -> str:
    """pi's sizes: ``512B``, ``30KB``, ``48.8KB``, ``1.2MB`` (binary units, one decimal,
    a trailing ``.0`` dropped as in pi's notices)."""
    if n_bytes < 1024:
        return f"{n_bytes}B"
    value, unit = (n_bytes / 1024, "KB") if n_bytes < 1024 * 1024 else (n_bytes / 1048576, "MB")
    text = f"{value:.1f}"
    return (text[:-2] if text.endswith(".0") else text) + unit


def _take_lines(
    lines: list[str], max_bytes: int
) -> tuple[list[str], int, Literal["lines", "bytes"]]:
    """The leading ``lines`` that fit in ``max_bytes`` joined by newlines, their size, and
    which limit stopped them (``lines`` when all of them fit)."""
    kept: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        size = byte_length(line) + (1 if i else 0)
        if used + size > max_bytes:
            return kept, used, "bytes"
        kept.append(line)
        used += size
    return kept, used, "lines"


def _whole(text: str, lines: int, size: int) -> Truncation:
    return Truncation(text, False, None, lines, size, lines, size, 1, lines)


def _byte_suffix(line: str, max_bytes: int) -> str:
    """The longest end of ``line`` within ``max_bytes`` UTF-8 bytes, never half a character."""
    used = 0
    for i in range(len(line) - 1, -1, -1):
        used += byte_length(line[i])
        if used > max_bytes:
            return line[i + 1 :]
    return line
