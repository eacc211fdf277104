"""The programs of a POSIX shell line that read or write files, and what each does
(:class:`~.engine.Effect`).

Reads: ``cat``, ``nl``, ``less`` and ``more`` print whole files; ``head`` and ``tail``
their first or last lines (``-n``, ``-N``, ``+N``, ``-c``); ``sed -n`` the lines its
print commands address (``'1,200p'``, ``'5p;9,$p'``, ``'/re/,/re/p'``); ``grep``,
``egrep``, ``fgrep`` and ``rg`` the lines of ONE named file they match (a search of a
directory, of several files, or printing names or counts reads nothing). Each of them
after a ``|`` keeps part of what it is given; ``diff`` and ``git diff`` of named files
print a part of each (:mod:`.diffs`). Writes: ``sed -i``'s files, ``tee``'s,
``apply_patch``'s (its here-document), and every output redirection. ``cd`` changes the
directory later relative paths are taken from; ``echo``, ``printf``, ``export`` and the
like print nothing that matters. Anything else prints what it likes.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from middleware.plugin.commands.diffs import a_file, diff, git
from middleware.plugin.commands.engine import (
    CD,
    FILTER,
    OTHER,
    QUIET,
    READ,
    UNFOLLOWED,
    Effect,
    passing,
)
from middleware.plugin.commands.options import Options, Table, read_options
from middleware.plugin.commands.patch import patch_use
from middleware.plugin.commands.syntax import KEYWORDS, Simple, Word
from middleware.plugin.file_use import (
    WHOLE,
    Part,
    Range,
    lines_part,
    part_ranges,
    select_last,
    select_lines,
)

_ASSIGNMENT = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*=")
#: Programs that print nothing a reader of the output must see.
_QUIET = frozenset({"echo", "printf", "true", ":", "export", "set", "unset", "pwd", "exit",
                    "sleep", "wait", "shopt", "umask", "ulimit", "alias"})  # fmt: skip
_WRAPPERS = frozenset({"command", "builtin", "nohup"})
#: A line address of a ``sed -n`` print command, and the command.
_SED_PRINT = re.compile(r"\A(\d+|\$|/(?:[^/\\]|\\.)*/)(?:,(\d+|\$|/(?:[^/\\]|\\.)*/))?p\Z")


def effect(command: Simple) -> Effect:
    """What ``command`` does (see the module's docstring)."""
    words = list(command.words)
    while words and (_ASSIGNMENT.match(words[0].text) or words[0].text in _WRAPPERS):
        words.pop(0)
    if not words:
        return Effect(QUIET)
    if words[0].text in KEYWORDS:
        if words[0].text in ("for", "case", "select", "function"):
            return Effect(UNFOLLOWED)
        while words and words[0].text in KEYWORDS:
            words.pop(0)
        inner = effect(Simple(tuple(words), command.redirects)) if words else Effect(QUIET)
        return Effect(UNFOLLOWED, writes=inner.writes, edits=inner.edits)
    if not words[0].literal:
        return Effect(OTHER)
    program = words[0].text.rsplit("/", 1)[-1]
    if program.endswith(".exe"):
        program = program[:-4]
    handler = _PROGRAMS.get(program)
    if handler is not None:
        return handler(words[1:], command)
    if program in _QUIET:
        return Effect(QUIET)
    return Effect(OTHER)


def _reading(
    operands: tuple[Word, ...], part: Part, narrow: Callable[[Part], Part] | None = None
) -> Effect:
    """Prints ``part`` of each operand (``-``: its input), or filters its input."""
    if any(not word.literal for word in operands):
        return Effect(OTHER)
    files = tuple(word.text for word in operands)
    if not files or files == ("-",):
        return Effect(FILTER, narrow=narrow)
    if "-" in files:
        return Effect(OTHER)
    return Effect(READ, files, part)


def _cat(args: list[Word], command: Simple) -> Effect:
    options = read_options(args, Table(None, long_flags=_CAT_LONG))
    return Effect(OTHER) if options is None else _reading(options.operands, WHOLE, passing)


_CAT_LONG = frozenset({"number", "number-nonblank", "show-all", "show-ends", "show-tabs",
                       "show-nonprinting", "squeeze-blank"})  # fmt: skip


def _nl(args: list[Word], command: Simple) -> Effect:
    table = Table("p", "bdfhilnsvw", frozenset({"no-renumber"}), frozenset({
        "body-numbering", "section-delimiter", "footer-numbering", "header-numbering",
        "line-increment", "join-blank-lines", "number-format", "number-separator",
        "starting-line-number", "number-width"}))  # fmt: skip
    options = read_options(args, table)
    return Effect(OTHER) if options is None else _reading(options.operands, WHOLE, passing)


def _head(args: list[Word], command: Simple) -> Effect:
    args = [Word("-n" + w.text[1:]) if re.fullmatch(r"-\d+", w.text) else w for w in args]
    options = read_options(args, _HEAD_TAIL)
    if options is None:
        return Effect(OTHER)
    count = _count(options, "10")
    if options.has("c", "bytes"):
        part = (("bytes", f"first {count}"),)
        return _reading(options.operands, part, lambda p: (*p, ("then", part[0][1])))
    if count.isdigit():
        ranges: tuple[Range, ...] = ((1, int(count)),)
        return _reading(options.operands, lines_part(ranges), lambda p: select_lines(p, ranges))
    words = (("head", f"-n {count}"),)
    return _reading(options.operands, words, lambda p: (*p, ("then", words[0][1])))


def _tail(args: list[Word], command: Simple) -> Effect:
    args = [
        Word("-n" + w.text[1:]) if re.fullmatch(r"[-+]\d+", w.text) and w is args[0] else w
        for w in args
    ]
    options = read_options(args, _HEAD_TAIL)
    if options is None:
        return Effect(OTHER)
    count = _count(options, "10")
    if options.has("c", "bytes"):
        part = (("bytes", f"last {count}"),)
        return _reading(options.operands, part, lambda p: (*p, ("then", part[0][1])))
    if count.startswith("+") and count[1:].isdigit():
        ranges: tuple[Range, ...] = ((max(int(count[1:]), 1), None),)
        return _reading(options.operands, lines_part(ranges), lambda p: select_lines(p, ranges))
    if count.isdigit():
        last = int(count)
        return _reading(options.operands, select_last(WHOLE, last), lambda p: select_last(p, last))
    return Effect(OTHER)


_HEAD_TAIL = Table(
    "qvzfF",
    "ncs",
    frozenset({"quiet", "silent", "verbose", "follow", "retry", "zero-terminated"}),
    frozenset({"lines", "bytes", "sleep-interval", "pid", "max-unchanged-stats"}),
)


def _count(options: Options, default: str) -> str:
    found = options.values("n", "lines", "c", "bytes")
    return found[-1] if found else default


def _sed(args: list[Word], command: Simple) -> Effect:
    in_place = [w for w in args if w.text.startswith(("-i", "--in-place"))]
    args = [w for w in args if w not in in_place]
    table = Table("nErsuz", "el", frozenset({"quiet", "silent", "regexp-extended", "separate",
                  "unbuffered", "null-data", "posix", "debug", "sandbox"}),
                  frozenset({"expression", "line-length"}))  # fmt: skip
    options = read_options(args, table)
    if options is None:
        return Effect(OTHER)
    scripts = options.values("e", "expression")
    operands = options.operands
    if not scripts:
        if not operands or not operands[0].literal:
            return Effect(OTHER)
        scripts, operands = [operands[0].text], operands[1:]
    if in_place:
        return Effect(QUIET, edits=tuple(w.text for w in operands if w.literal))
    if not options.has("n", "quiet", "silent"):
        return Effect(OTHER)
    part = _sed_part(";".join(scripts))
    if part is None:
        return Effect(OTHER)
    if len(operands) > 1:  # the files are read as one text: line numbers run on
        part = (("sed -n", ";".join(scripts)),)
    ranges = part_ranges(part)
    if ranges is not None:
        return _reading(operands, part, lambda p: select_lines(p, ranges))
    return _reading(operands, part, lambda p: (*p, ("then", f"sed -n {part[0][1]}")))


def _sed_part(script: str) -> Part | None:
    """The part of its input a ``sed -n`` script prints, if it only prints lines."""
    commands = [c.strip() for c in re.split(r"[;\n]", script) if c.strip()]
    ranges: list[Range] = []
    for piece in commands:
        found = _SED_PRINT.match(piece)
        if found is None:
            return None if piece != "p" else WHOLE
        first, last = found.group(1), found.group(2)
        if not first.isdigit() or (last is not None and not (last.isdigit() or last == "$")):
            return (("sed -n", ";".join(commands)),)
        start = max(int(first), 1)
        end = start if last is None else None if last == "$" else max(int(last), start)
        ranges.append((start, end))
    return lines_part(tuple(ranges)) if ranges else None


def _grep(args: list[Word], command: Simple, *, ripgrep: bool = False) -> Effect:
    options = read_options(args, _RG if ripgrep else _GREP)
    if options is None or options.has(*_LISTING) or (ripgrep and options.has("r", "replace")):
        return Effect(OTHER)
    operands = options.operands
    if not options.has("e", "f", "regexp", "file"):
        if not operands:
            return Effect(OTHER)
        operands = operands[1:]
    recursive = ripgrep or options.has("r", "R", "recursive", "dereference-recursive")
    files = list(operands)
    said = shlex.join(w.text for w in args if w not in files)
    if not files:
        return Effect(FILTER, narrow=lambda p: (*p, ("search", said)))
    if len(files) > 1 or not files[0].literal or (recursive and not a_file(files[0].text)):
        return Effect(OTHER)
    return _reading((files[0],), (("search", said),))


_LISTING = ("l", "L", "c", "q", "files-with-matches", "files-without-match", "count", "quiet",
            "files", "count-matches", "json", "stats", "type-list")  # fmt: skip
_GREP = Table(
    "EFGPiyvwxcLloqsbHhnTZzraUIR", "efmABCdD",
    frozenset({"extended-regexp", "fixed-strings", "basic-regexp", "perl-regexp", "ignore-case",
               "no-ignore-case", "invert-match", "word-regexp", "line-regexp", "count", "color",
               "colour", "files-without-match", "files-with-matches", "only-matching", "quiet",
               "silent", "no-messages", "byte-offset", "with-filename", "no-filename",
               "line-number", "initial-tab", "null", "null-data", "text", "recursive",
               "dereference-recursive", "binary"}),
    frozenset({"regexp", "file", "max-count", "after-context", "before-context", "context",
               "directories", "devices", "include", "exclude", "exclude-dir", "label",
               "binary-files", "color", "colour"}),
)  # fmt: skip
_RG = Table(
    "iSsFwxvnNHIoUPlLcqzaup0", "efgtTABCmMjEdr",
    frozenset({"ignore-case", "smart-case", "case-sensitive", "fixed-strings", "word-regexp",
               "line-regexp", "invert-match", "line-number", "no-line-number", "with-filename",
               "no-filename", "only-matching", "multiline", "pcre2", "files-with-matches",
               "files-without-match", "count", "count-matches", "quiet", "search-zip", "text",
               "hidden", "no-ignore", "no-heading", "heading", "column", "trim", "vimgrep",
               "no-messages", "json", "files", "stats", "type-list", "follow", "unrestricted",
               "null", "byte-offset", "no-config", "crlf", "passthru"}),
    frozenset({"regexp", "file", "glob", "iglob", "type", "type-not", "after-context",
               "before-context", "context", "max-count", "max-columns", "threads", "sort",
               "sortr", "encoding", "engine", "max-filesize", "max-depth", "color", "colors",
               "context-separator", "field-match-separator", "path-separator", "replace",
               "pre", "pre-glob", "type-add"}),
)  # fmt: skip


def _tee(args: list[Word], command: Simple) -> Effect:
    options = read_options(args, Table("aip", long_flags=frozenset({"append"})))
    if options is None:
        return Effect(OTHER)
    writes = tuple(w.text for w in options.operands if w.literal and w.text != "-")
    return Effect(FILTER, narrow=passing, writes=writes)


def _apply_patch(args: list[Word], command: Simple) -> Effect:
    texts = [r.target.text for r in command.redirects if r.op in ("<<", "<<-", "<<<")]
    texts += [w.text for w in args]
    uses = [patch_use(text) for text in texts]
    return Effect(
        OTHER,
        writes=tuple(f for u in uses for f in u.writes),
        edits=tuple(f for u in uses for f in u.edits),
    )


def _cd(args: list[Word], command: Simple) -> Effect:
    operands = [w for w in args if w.text not in ("-L", "-P", "-e", "-@", "--")]
    if len(operands) != 1 or not operands[0].literal or operands[0].text == "-":
        return Effect(CD)
    return Effect(CD, (operands[0].text,))


_PROGRAMS: dict[str, Callable[[list[Word], Simple], Effect]] = {
    "cat": _cat, "less": _cat, "more": _cat, "nl": _nl, "head": _head, "tail": _tail,
    "sed": _sed, "grep": _grep, "egrep": _grep, "fgrep": _grep,
    "rg": lambda args, command: _grep(args, command, ripgrep=True),
    "diff": diff, "git": git, "tee": _tee, "apply_patch": _apply_patch, "applypatch": _apply_patch,
    "cd": _cd, "pushd": lambda args, command: Effect(CD), "popd": lambda args, command: Effect(CD),
}  # fmt: skip
