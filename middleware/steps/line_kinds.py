"""What a line of tool output reports: an error, a warning, a stack frame that locates
one, and what kind of line it is (to tell a run of alike lines from a line that breaks it).

The outline of a preview (:mod:`.outline`) shows these lines first, and a summary keeps
its result's first error lines (:func:`error_lines`); neither looks for them in a file's
content (:mod:`.file_text`). The rules read where
tools put a severity, not one tool's strings: a severity word at the start of a line
(``error:``, ``error[E0308]:``, ``npm warn``), after a location (``a.c:3:5: error:``,
``a.ts(4,7): error TS2345``, ``test_a.py:12: AssertionError``), in capitals as a status
or a log level (``FAILED``, ``[ERROR]``, ``npm ERR!``), an exception's name ending a
traceback (``KeyError: 'x'``, ``Caused by: java.io...``), a count of failures (``3
failed``), a linter's rule code. Code being read is not a report: an indented ``except
ValueError:`` or a parameter named ``error`` is not an error line.

Each rule runs once over the whole text (``re.MULTILINE``), not once per line: the
outline classifies a 200,000-character span in a few milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import groupby

#: A line's severity: none, a warning, an error.
NONE, WARNING, ERROR = 0, 1, 2
#: Characters of an error line a summary keeps (:func:`error_lines`).
REPORT_CHARS = 200
#: Lines before or after an error line its nearest stack frame is looked for in.
FRAME_REACH = 4
#: A run of alike lines (the same kind) is this long at least for a line that interrupts
#: it to count as unlike its neighbours.
RUN_LENGTH = 4

#: Where a location ends and a severity follows: ``path:12:`` or ``path:12:5:``
#: (gcc, mypy, pytest), ``path(12,5):`` (tsc, C#), ``12:5`` (eslint's indented rows).
_AFTER_LOCATION = r"(?::\d+(?::\d+)?:|\(\d+,\d+\):|^[ \t]+\d+:\d+)[ \t]+(?:fatal[ \t]+)?"
#: A word the severity follows at a line's start: a program name (``npm error``,
#: ``collect2: error:``). The line starts at column 0: indented code is not a report.
_LEADING = r"^(?:[\w./@-]+:?[ \t])?"
#: What follows a lower-case severity word in a report: ``:``, ``!``, a ``[code]``, a
#: code (``error TS2345``) or more words, but not code's ``= (.``.
_LABEL_END = r"(?:\[[\w-]+\])?(?:[ \t][A-Z]+\d+)?(?::|!|[ \t]+(?![=(.\s]))"
_QUALIFIED = r"(?:[\w$]+\.)*"


def _rules(lower: str, exception: str, capitals: str, counted: str) -> re.Pattern[str]:
    return re.compile(
        "|".join(
            (
                _LEADING + f"(?:{lower}){_LABEL_END}",
                _AFTER_LOCATION + f"(?:{lower}|\\w*{exception})\\b",
                f"\\[(?:{lower})\\]",
                # An exception or warning class ending a traceback, at column 0 or after
                # pytest's ``E``, ``Caused by:`` or Java's ``Exception in thread "main"``.
                f'^(?:E[ \\t]+|Caused by:[ \\t]|Exception in thread "[^"\\n]*"[ \\t])?'
                f"{_QUALIFIED}(?:[A-Z][\\w$]*)?{exception}(?::[ \\t]|:?[ \\t]*$)",
                f"(?<![\\w.$\"'-])(?:{capitals})(?![\\w\"'-])",
                f"\\b[1-9]\\d*[ \\t](?:{counted})\\b",
            )
        ),
        re.MULTILINE,
    )


_ERROR = re.compile(
    _rules(
        lower="error|fatal(?: error)?|panic",
        exception="(?:Error|Exception|Failure|Fault)",
        capitals="ERROR|ERRORS|ERR!?|FAIL|FAILED|FAILURE|FATAL|PANIC|CRITICAL|SEVERE|CONFLICT",
        counted="failed|errors?|failures?|failing",
    ).pattern
    + "|"
    + "|".join(
        (
            r"^[ \t]*Traceback \(most recent call last\)",
            r"\bpanicked at\b",
            r"^Segmentation fault|\(core dumped\)",
            r"\bError \d+[ \t]*$",  # make: *** [Makefile:9: a.o] Error 1
            r"\b[Ff]ailed\b(?=[ \t]*[;:!]|[ \t]*$|[ \t]+(?:to|with|because|due)\b)",
            # A linter's rule code opening a finding: ``F401 [*] `os` imported but unused``.
            r"^(?:\S+:\d+:\d+:[ \t]+)?[A-Z]{1,4}\d{3,4}[ \t](?:\[\*\][ \t])?\S",
            r"^E[ \t]{2,}\S",  # pytest's lines explaining a failure
            r"^>[ \t]{3,}\S",  # and the line it marks as the one that raised
        )
    ),
    re.MULTILINE,
)
_WARNING = re.compile(
    _rules(
        lower="warning|warn",
        exception="Warning",
        capitals="WARNING|WARNINGS|WARN|DEPRECATED",
        counted="warnings?",
    ).pattern
    # A compiler's diagnostic opening with its location, whatever its severity: javac's
    # ``A.java:[5,21] incompatible types`` (a linter's ``a.py:3:5: C0103: ...`` is not
    # one: its hundred findings would crowd the outline).
    + r"|^\S+\.\w+(?::\[\d+,\d+\]|\(\d+,\d+\):)[ \t]+\S",
    re.MULTILINE,
)
#: What a line reporting an error or warning holds, lowered: the lines the rules run on.
_WORDS = ("err", "fail", "fatal", "panic", "exception", "traceback", "critical", "severe",
          "conflict", "fault", "core dumped", "warn", "deprecat")  # fmt: skip
_ANY_WORD = re.compile("|".join(_WORDS), re.IGNORECASE)
#: How a report with none of those words opens: pytest's ``E`` lines and the ``>`` line
#: it marks as the one that raised (indented like the source, unlike a quote's ``> ``), a
#: rule code, a location.
_OPENING = re.compile(
    r"^(?:E[ \t]{2}|>[ \t]{3,}\S|[A-Z]{1,4}\d{3,4}[ \t]|\S+:\d+:\d+:[ \t]+[A-Z]{1,4}\d{3,4}[ \t]"
    r"|\S+\.\w+(?::\[\d+,\d+\]|\(\d+,\d+\):))",
    re.MULTILINE,
)
#: A stack frame or a location line of a traceback: Python's ``File "...", line N``,
#: ``at f (x.js:3:9)`` and Java's ``at a.B.c(B.java:12)``, rustc's ``--> src/a.rs:4:5``,
#: pytest's ``a.py:12: in f``, Go's ``/x/a.go:12 +0x1d``, gdb's ``#3 0x... in f``.
_FRAME = re.compile(
    r"^[ \t]*File \"[^\"\n]+\", line \d+"
    r"|^[ \t]+at[ \t][^\n]*:\d+(?::\d+)?\)?[ \t]*$"
    r"|^[ \t]*-->[ \t]*\S+:\d+:\d+"
    r"|^[ \t]*\S+\.\w+:\d+(?::\d+)?(?::[ \t]+in[ \t]+\S+|[ \t]+\+0x[0-9a-f]+)?[ \t]*$"
    r"|^#\d+[ \t]+0x[0-9a-f]+[ \t]",
    re.MULTILINE,
)
#: A line's kind: its first plain word (``PASSED``, ``INFO``, ``Compiling``), skipping
#: timestamps, numbers, paths and ids.
_KIND = re.compile(r"^[^\n]*?(?<![\w./:@$-])([A-Za-z]+)(?![\w./:@$-])", re.MULTILINE)


def severities(text: str, start: int, end: int) -> dict[int, int]:
    """The severity of each line of ``text[start:end]`` that reports an error or a
    warning, by the position the line starts at (``start`` starts a line).

    The rules run on the few lines that hold a severity's word (found by ``str.find`` in
    the lowered text) or open like a diagnostic: over the whole text, their unanchored
    parts would cost a third of a second per MB."""
    found: dict[int, int] = {}
    for line in sorted(_candidates(text, start, end)):
        level = _severity(_line(text, line, end))
        if level:
            found[line] = level
    return found


def error_lines(text: str, limit: int) -> list[str]:
    """The first ``limit`` lines of ``text`` that report an error (those a preview's
    outline shows first), stripped and clipped to :data:`REPORT_CHARS`: what a summary
    keeps of a log or a command's output. Each is a piece of the text, in order."""
    found: list[str] = []
    if limit <= 0:
        return found
    for line in sorted(_candidates(text, 0, len(text))):
        body = _line(text, line, len(text))
        if _severity(body) == ERROR:
            found.append(body.strip()[:REPORT_CHARS])
            if len(found) >= limit:
                break
    return found


def _line(text: str, start: int, end: int) -> str:
    """The line of ``text`` that starts at ``start``, ending by ``end``."""
    stop = text.find("\n", start, end)
    return text[start : end if stop == -1 else stop]


def _severity(line: str) -> int:
    if _ERROR.search(line):
        return ERROR
    return WARNING if _WARNING.search(line) else NONE


def _candidates(text: str, start: int, end: int) -> set[int]:
    """Where the lines of ``text[start:end]`` that may report an error or warning start."""
    span = text[start:end]
    lowered = span.lower()
    hits: list[int] = []
    if len(lowered) == len(span):  # lowering kept every position (no "İ")
        for word in _WORDS:
            at = lowered.find(word)
            while at != -1:
                hits.append(at)
                at = lowered.find(word, at + len(word))
    else:
        hits = [match.start() for match in _ANY_WORD.finditer(span)]
    hits.extend(match.start() for match in _OPENING.finditer(span))
    return {start + span.rfind("\n", 0, at) + 1 for at in hits}


def frames(text: str, start: int, end: int) -> set[int]:
    """Where the stack-frame lines of ``text[start:end]`` start."""
    return set(_lines_matching(_FRAME, text, start, end))


def kinds(text: str, start: int, end: int) -> dict[int, str]:
    """The kind of each line of ``text[start:end]`` that has a plain word, by where the
    line starts."""
    return {
        match.start(): match.group(1)
        for match in _KIND.finditer(text, start, end)
        if match.start() == start or text[match.start() - 1] == "\n"
    }


def _lines_matching(rule: re.Pattern[str], text: str, start: int, end: int) -> Iterator[int]:
    """Where each line of ``text[start:end]`` a match of ``rule`` falls in starts (once)."""
    last = -1
    for match in rule.finditer(text, start, end):
        line = text.rfind("\n", start, match.start()) + 1 or start
        line = max(line, start)
        if line != last:
            last = line
            yield line


def nearest_frames(errors: list[int], framed: list[int]) -> list[int]:
    """The frame line nearest each error line, before it (Python's traceback ends with
    its innermost frame) and after it (Java and JavaScript print theirs below)."""
    nearest: list[int] = []
    at = 0
    for error in errors:
        while at < len(framed) and framed[at] < error:
            at += 1
        if at > 0 and error - framed[at - 1] <= FRAME_REACH:
            nearest.append(framed[at - 1])
        if at < len(framed) and framed[at] - error <= FRAME_REACH:
            nearest.append(framed[at])
    return nearest


def breaking_runs(kinds_of: list[tuple[int, str]]) -> list[int]:
    """The lines whose kind interrupts a run of at least :data:`RUN_LENGTH` alike lines
    that goes on after them."""
    runs = [(kind, [n for n, _ in group]) for kind, group in groupby(kinds_of, lambda x: x[1])]
    return [
        numbers[0]
        for (before, previous), (_, numbers), (after, _) in zip(
            runs, runs[1:], runs[2:], strict=False
        )
        if len(previous) >= RUN_LENGTH and after == before and len(numbers) <= 2
    ]
