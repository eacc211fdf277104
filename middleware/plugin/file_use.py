"""What one tool call does with files (:class:`FileUse`), and the parts of a file a read
selects.

A *part* names what of the file a read printed, in words two reads of the same part
write alike: ``()`` for the whole file; ``(("lines", "1-200"),)`` for line ranges known
by number (``sed -n '1,200p'``, ``head -n 200``; ``"5-"`` runs to the end); ``(("last",
"20"),)`` for ``tail -n 20``; a tool's own range arguments (``(("offset", "100"),)``); and
any other selection by its words (``(("search", "-n def"),)``, a filter after it as a
further ``("then", ...)`` pair). A later read *covers* an earlier one when it reads the
whole file, the same part, or lines including all of the earlier one's.
"""

from __future__ import annotations

from typing import NamedTuple

#: What part of a file a read printed (see the module's docstring).
Part = tuple[tuple[str, str], ...]
WHOLE: Part = ()


class FileUse(NamedTuple):
    """The files one call reads (each with the part it printed, :data:`Part`), those it
    writes (replaces, creates, deletes) and those it edits (changes a part of). A call
    ``reads`` only when its whole result is text of those files: a shell command that also
    runs anything else reads nothing, whatever it writes."""

    reads: tuple[tuple[str, Part], ...] = ()
    writes: tuple[str, ...] = ()
    edits: tuple[str, ...] = ()

    @property
    def files_read(self) -> tuple[str, ...]:
        """The files read, in order, each once."""
        return tuple(dict.fromkeys(file for file, _ in self.reads))


NOTHING = FileUse()

#: A line range: its first line and its last (``None``: to the end), numbered from 1.
Range = tuple[int, int | None]


def lines_part(ranges: tuple[Range, ...]) -> Part:
    """The part of the lines ``ranges`` select, in order (``()`` for line 1 to the end)."""
    return WHOLE if ranges == ((1, None),) else (("lines", _words(ranges)),)


def _words(ranges: tuple[Range, ...]) -> str:
    return ",".join(f"{a}-{'' if b is None else b}" for a, b in ranges)


def part_ranges(part: Part) -> tuple[Range, ...] | None:
    """The line ranges a part selects, if it selects lines by number (the whole file is
    line 1 to the end)."""
    if part == WHOLE:
        return ((1, None),)
    if len(part) != 1 or part[0][0] != "lines":
        return None
    found: list[Range] = []
    for piece in part[0][1].split(","):
        first, _, last = piece.partition("-")
        if not first.isdigit() or not (last.isdigit() or last == ""):
            return None
        found.append((int(first), int(last) if last else None))
    return tuple(found)


def select_lines(part: Part, ranges: tuple[Range, ...]) -> Part:
    """What a filter keeping the lines ``ranges`` of its input (``sed -n '5,9p'``, ``head``)
    leaves of a read of ``part``: the file's lines when ``part`` is known by line numbers,
    else ``part`` followed by the filter's words."""
    had = part_ranges(part)
    if had is None:
        return (*part, ("then", f"lines {_words(ranges)}"))
    kept: list[Range] = []
    for first, last in ranges:
        kept += _slice(had, first, last)
    return lines_part(tuple(kept)) if kept else (("lines", "none"),)


def select_last(part: Part, count: int) -> Part:
    """What ``tail -n COUNT`` leaves of a read of ``part``: the last lines of the file for
    a whole read, the last lines of a closed line range, else ``part`` and the filter."""
    had = part_ranges(part)
    if had == ((1, None),):
        return (("last", str(count)),)
    last = had[0][1] if had is not None and len(had) == 1 else None
    if had is not None and last is not None:
        first = had[0][0]
        if not count:
            return (("lines", "none"),)
        return lines_part(((max(first, last - count + 1), last),))
    return (*part, ("then", f"last {count}"))


def covers(later: Part, earlier: Part) -> bool:
    """Whether a read of ``later`` prints all that a read of ``earlier`` printed (of the
    same file): the whole file, the same part, or lines including all of ``earlier``'s."""
    if later in (WHOLE, earlier):
        return True
    outer, inner = part_ranges(later), part_ranges(earlier)
    if outer is None or inner is None:
        return False
    return all(any(_within(piece, span) for span in outer) for piece in inner)


def _within(piece: Range, span: Range) -> bool:
    if piece[0] < span[0]:
        return False
    if span[1] is None:
        return True
    return piece[1] is not None and piece[1] <= span[1]


def _slice(had: tuple[Range, ...], first: int, last: int | None) -> list[Range]:
    """The file's lines that lines ``first``-``last`` of the text ``had`` selects are."""
    out: list[Range] = []
    offset = 0  # lines of the text before the current range
    for a, b in had:
        size = None if b is None else b - a + 1
        start = max(first - offset, 1)
        end = None if last is None else last - offset
        if end is not None and end < 1:
            break
        if size is None or start <= size:
            top = b if end is None else (a + end - 1 if size is None else a + min(end, size) - 1)
            out.append((a + start - 1, top))
        if size is None:
            break
        offset += size
    return out
