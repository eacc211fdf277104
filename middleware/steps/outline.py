"""The outline of what a preview leaves out: the error and warning lines of the omitted
middle first, then the lines that carry the most distinctive tokens (names, paths,
identifiers) the head and tail do not show.

A head + tail preview hides what the model most often comes back for in a long output:
the failures in the middle of a test run or a build log, the definitions and names in
the middle of a file, the matching lines of a long search. The outline keeps, within a
character budget and in this order (:mod:`.line_kinds` says what each line is):

1. the lines reporting an error, in file order, each whole (up to :data:`REPORT_WIDTH`)
   when they all fit so; and the line a report announces (``... the following exception
   was raised:``, ``ERROR: these tests failed:``), which is part of it;
2. the stack frame nearest each of them (the ``File "...", line N`` before a Python
   exception, the ``at ...`` line after a Java or JavaScript one);
3. the warning lines, in file order, in at most :data:`WARNING_SHARE` of the budget;
4. the lines that break a run of alike lines (a ``SKIPPED`` among ``PASSED``, a ``WARN``
   among ``INFO``) and show a name the head and tail do not, in at most
   :data:`UNLIKE_SHARE` of the budget;
5. with the room left, the lines that add the most new tokens per character (earliest
   line on ties, while a line shows at least one new token per 100 characters).

A file's content (:mod:`.file_text`: a read, numbered lines, source code) has no error,
warning or frame lines: ``return fmt.Errorf("failed to open")`` is code, not a failure.

When not every error or warning line fits, a last line says how many were left out and
where (``… and 7 more error lines (lines 410–1290)``): the model knows to read the spill
file. Lines are shown with their numbers, in file order: a pure function of the text, so
the preview never changes.

A line is shown clipped, and only the tokens its clipped part shows count. Long lines (a
lock file's entries, minified JSON) carry what the model wants at their start (a name, a
version) and a long tail of dependencies or hashes after it, so the token cover is built
at each of :data:`LINE_WIDTHS` and the one that shows the most tokens is kept: many short
lines, or fewer whole ones.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable

from middleware.steps.line_kinds import (
    ERROR,
    WARNING,
    breaking_runs,
    frames,
    kinds,
    nearest_frames,
    severities,
)
from middleware.steps.mentions import cut_between_tokens, distinctive_tokens, tokens_of

#: Characters of one outline line kept at most, tried in order (the first wins a tie).
LINE_WIDTHS = (160, 80)
#: Characters of an error line kept when every error line fits so: an assertion's
#: values, a compiler's expected and found types come after the first 160, and the model
#: copies the whole line into its fix.
REPORT_WIDTH = 400
#: New tokens a line must show per character of the outline: one per 100. Below that a line
#: costs its room on every later request and is rarely what the model goes back to.
MIN_TOKENS_PER_CHAR = 1 / 100
#: Characters of the omitted part looked at, from its start: a 50 MB log is outlined from
#: its first 200,000 characters, in bounded time and memory.
MAX_SCAN = 200_000
#: Characters of the omitted part searched for error and warning lines: only the few lines
#: holding a severity's word are read past :data:`MAX_SCAN`.
MAX_REPORT_SCAN = 1_000_000
#: The first line of an outline.
HEADING = "\nLines from the omitted part:"
#: Share of the budget warning lines may take (errors may take all of it): a linter's
#: hundred findings leave room for the names of the rest.
WARNING_SHARE = 1 / 2
#: Share of the budget the lines that break a run may take.
UNLIKE_SHARE = 1 / 4
#: A line reporting an error or a warning this short is shown only with a name in it
#: (a bare ``[ERROR]`` says nothing).
MIN_REPORT_CHARS = 12

_Line = tuple[int, str, frozenset[str]]  # number, rendered line, the new tokens it shows
#: A line of an outline, and one of its notices (:func:`_notice`): the docs' examples are
#: checked against them (tests/test_docs_texts.py).
SHOWN = re.compile(r"([1-9][0-9]*): (.*)", re.DOTALL)
NOTICE = re.compile(r"… and [0-9]+ more (?:error|warning) lines? \(lines? [0-9]+(?:–[0-9]+)?\)")


def outline(text: str, start: int, end: int, budget: int, *, reports: bool = True) -> str:
    """The outline of ``text[start:end]`` in at most ``budget`` characters, or ``""``.

    Only lines wholly inside the span are shown: any line within :data:`MAX_SCAN` of its
    start, and error and warning lines within :data:`MAX_REPORT_SCAN`. A token already in
    the rest of the text (the head and tail the preview keeps) adds nothing. Without
    ``reports`` (a file's content, :mod:`.file_text`: its lines report nothing) no line is
    taken for an error, a warning or a stack frame.
    """
    if budget <= len(HEADING) or end <= start:
        return ""
    first = text.find("\n", start - 1) + 1 if start > 0 and text[start - 1] != "\n" else start
    shown = distinctive_tokens(text[:start]) | distinctive_tokens(text[end:])
    last = text.rfind("\n", first, min(end, first + MAX_SCAN)) + 1
    scan = _Scan(text, first, last, shown, reports=reports)
    if reports:
        scan.add_reports(text.rfind("\n", first, min(end, first + MAX_REPORT_SCAN)) + 1)
    return _render(_Selection(budget - len(HEADING), scan))


class _Scan:
    """The lines of ``text[first:last]`` (each ends before ``last``) as the outline may
    show them: at each width with the new tokens they show, and what :mod:`.line_kinds`
    says they are."""

    def __init__(
        self, text: str, first: int, last: int, shown: set[str], *, reports: bool = True
    ) -> None:
        self.text, self.shown, self.last = text, shown, last
        self.lines: dict[int, list[_Line]] = {w: [] for w in LINE_WIDTHS}
        self.wide: dict[int, _Line] = {}  # each line at the widest width, by number
        self.reports: dict[int, list[_Line]] = {ERROR: [], WARNING: []}
        #: The error lines at :data:`REPORT_WIDTH`, by number.
        self.whole: dict[int, _Line] = {}
        #: The severity of the report the next line with text continues (its line ends
        #: with ``:``), or none.
        self.announced = 0
        self.framed: list[int] = []  # numbers of the frame lines, in order
        self.kinds: list[tuple[int, str]] = []  # (number, kind) of the lines with a word
        severity, frame, kind = (
            severities(text, first, last) if reports else {},
            frames(text, first, last) if reports else set[int](),
            kinds(text, first, last),
        )
        self.number = text.count("\n", 0, first) + 1  # of the line being read
        position = first
        while position < last:
            stop = text.find("\n", position, last)
            level = severity.get(position)
            line = as_shown(text[position:stop])
            entry: _Line | None = None
            for width in LINE_WIDTHS if line else ():
                if entry is None or len(line) > width:  # a short line is the same at any width
                    entry = self._entry(line, width)
                    self.wide.setdefault(self.number, entry)
                if entry[2]:
                    self.lines[width].append(entry)
            if line:
                self._report(level, line)
                if position in frame:
                    self.framed.append(self.number)
                if position in kind:
                    self.kinds.append((self.number, kind[position]))
            position = stop + 1
            self.number += 1

    def add_reports(self, last: int) -> None:
        """Also the error and warning lines from where the scan stopped to ``last``."""
        counted = self.last
        for position, level in severities(self.text, self.last, last).items():
            self.number += self.text.count("\n", counted, position)
            counted = position
            stop = self.text.find("\n", position, last)
            self._report(level, as_shown(self.text[position:stop]))

    def _entry(self, line: str, width: int) -> _Line:
        clipped = cut_between_tokens(line, width)
        return (
            self.number,
            f"{self.number}: {clipped}",
            frozenset(tokens_of(clipped)) - self.shown,
        )

    def _report(self, level: int | None, line: str) -> None:
        if not line:
            return
        level, self.announced = level or self.announced, 0
        if not level:
            return
        entry = self.wide.get(self.number) or self._entry(line, LINE_WIDTHS[0])
        self.wide[self.number] = entry
        if len(line) >= MIN_REPORT_CHARS or entry[2]:
            self.reports[level].append(entry)
            if level == ERROR:  # a line no wider than the first width is whole already
                wide = len(line) > LINE_WIDTHS[0]
                self.whole[self.number] = self._entry(line, REPORT_WIDTH) if wide else entry
            self.announced = level if line.endswith(":") else 0


class _Selection:
    """The lines of one outline, chosen in the order the module says, within ``room``."""

    def __init__(self, room: int, scan: _Scan) -> None:
        self.room = room
        self.scan = scan
        self.chosen: dict[int, str] = {}
        self.notices: list[str] = []
        errors, warnings = scan.reports[ERROR], scan.reports[WARNING]
        # The warnings' notice is kept room for while errors are chosen: if errors do
        # not all fit, no warning does, and the model must still hear of them.
        reserve = len(_notice(warnings, 0, "warning"))
        whole = [scan.whole[number] for number, _, _ in errors]
        if sum(len(rendered) + 1 for _, rendered, _ in whole) <= self.room - reserve:
            errors = whole
            scan.wide.update((line[0], line) for line in whole)
        if self._take(errors, self.room - reserve, "error"):
            if reserve <= self.room:
                self.notices.append(_notice(warnings, 0, "warning"))
                self.room -= reserve
        else:
            shown = [n for n, _, _ in errors]
            self._fit(scan.wide[n] for n in nearest_frames(shown, scan.framed))
            share = max(int(room * WARNING_SHARE), reserve)
            self._take(warnings, min(self.room, share), "warning")
        unlike = int(room * UNLIKE_SHARE)
        for number in breaking_runs(scan.kinds):
            _, rendered, tokens = scan.wide[number]
            if tokens and number not in self.chosen and len(rendered) + 1 <= min(unlike, self.room):
                self.chosen[number] = rendered
                self.room -= len(rendered) + 1
                unlike -= len(rendered) + 1

    def _take(self, reports: list[_Line], room: int, noun: str) -> bool:
        """Choose the longest prefix of ``reports`` that fits in ``room`` with the notice
        of the rest; ``True`` if some are left out."""
        used, best, notice = 0, -1, ""
        for i in range(len(reports) + 1):
            rest = _notice(reports, i, noun)
            if used + len(rest) <= room:
                best, notice = i, rest
            if i == len(reports):
                break
            used += len(reports[i][1]) + 1
            if used > room:
                break
        if best < 0:
            return bool(reports)
        for number, rendered, _ in reports[:best]:
            self.chosen[number] = rendered
            self.room -= len(rendered) + 1
        if notice:
            self.notices.append(notice)
            self.room -= len(notice)
        return best < len(reports)

    def _fit(self, candidates: Iterable[_Line]) -> None:
        for number, rendered, _ in candidates:
            if number not in self.chosen and len(rendered) + 1 <= self.room:
                self.chosen[number] = rendered
                self.room -= len(rendered) + 1


def _render(selection: _Selection) -> str:
    """The chosen lines, those of the token cover of the room left (at the width that
    shows the most tokens), in file order, and the notices."""
    scan, covered = selection.scan, set[str]()
    for number in selection.chosen:
        covered |= scan.wide[number][2]
    best: list[tuple[int, str]] = []
    most = -1
    for width in LINE_WIDTHS:
        free = [line for line in scan.lines[width] if line[0] not in selection.chosen]
        chosen, count = _choose(free, selection.room, covered)
        if count > most:
            best, most = chosen, count
    shown = sorted([*selection.chosen.items(), *best])
    if not shown and not selection.notices:
        return ""
    return HEADING + "".join(f"\n{r}" for _, r in shown) + "".join(selection.notices)


def _notice(reports: list[_Line], shown: int, noun: str) -> str:
    """``… and 7 more error lines (lines 410–1290)``: of the ``reports`` past the first
    ``shown``."""
    left = len(reports) - shown
    if left <= 0:
        return ""
    if left == 1:
        return f"\n… and 1 more {noun} line (line {reports[-1][0]})"
    return f"\n… and {left} more {noun} lines (lines {reports[shown][0]}–{reports[-1][0]})"


def _choose(
    lines: list[_Line], budget: int, covered: set[str]
) -> tuple[list[tuple[int, str]], int]:
    """Lazy greedy cover: the line adding the most uncovered tokens per character next,
    down to :data:`MIN_TOKENS_PER_CHAR`. Returns the lines chosen and how many distinct
    tokens they show besides ``covered``."""
    covered = set(covered)
    before = len(covered)
    heap = [
        (-len(tokens - covered) / (len(rendered) + 1), number, i)
        for i, (number, rendered, tokens) in enumerate(lines)
    ]
    heapq.heapify(heap)
    chosen: list[tuple[int, str]] = []
    used = 0
    while heap:
        score, number, i = heapq.heappop(heap)
        _, rendered, tokens = lines[i]
        new = len(tokens - covered)
        if new == 0:
            continue
        current = -new / (len(rendered) + 1)
        if current > score:  # stale: its tokens were covered since; weigh it again
            heapq.heappush(heap, (current, number, i))
            continue
        cost = len(rendered) + 1
        if new / cost < MIN_TOKENS_PER_CHAR:
            break  # the densest line left: every other one shows less per character
        if used + cost > budget:
            continue
        chosen.append((number, rendered))
        covered |= tokens
        used += cost
    return chosen, len(covered) - before


def as_shown(line: str) -> str:
    """A line as the outline shows it: its runs of spaces squeezed, which fits more lines
    in the outline; but pytest's ``>`` line, the code that raised, and its ``E`` lines, the
    failure's own words, keep their spacing: the model copies them (into its fix, into a
    search), and spaces inside a value the assertion compares are part of the value."""
    if line.startswith(">"):
        return line.strip()
    if line.startswith("E ") and line[2:].strip():
        return line.rstrip()
    return " ".join(line.split())
