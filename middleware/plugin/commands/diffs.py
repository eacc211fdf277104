"""Diffs of named files, read as parts of them: ``diff a b`` prints the lines of both
that differ, ``git diff`` (``git show``) what changed in the files it names, and ``git show
REV:path`` the file as it was. An agent's next edit quotes these lines as it quotes a
read's. A diff of no named file (``git diff``, ``gh pr diff``), of directories, or one that
lists names or counts (``--stat``, ``-q``) reads nothing."""

from __future__ import annotations

import shlex

from middleware.plugin.commands.engine import OTHER, READ, Effect, resolve
from middleware.plugin.commands.options import Table, read_options
from middleware.plugin.commands.syntax import Simple, Word


def diff(args: list[Word], command: Simple) -> Effect:
    """``diff a b``: the lines of the two files that differ, a part of each."""
    options = read_options(args, _DIFF)
    if options is None or options.has("q", "brief", "r", "recursive", "s"):
        return Effect(OTHER)
    files = options.operands
    if len(files) != 2 or any(not w.literal or w.text == "-" for w in files):
        return Effect(OTHER)
    said = shlex.join(w.text for w in args)
    return Effect(READ, tuple(w.text for w in files), (("diff", said),))


_DIFF = Table(None, "UCIxXFLSD", frozenset({
    "unified", "context", "ignore-case", "ignore-all-space", "ignore-space-change",
    "ignore-blank-lines", "ignore-tab-expansion", "ignore-trailing-space", "text", "new-file",
    "color", "minimal", "strip-trailing-cr", "expand-tabs", "initial-tab", "side-by-side",
    "left-column", "suppress-common-lines", "show-c-function", "speed-large-files",
}), frozenset({
    "label", "ignore-matching-lines", "show-function-line", "width", "tabsize",
}))  # fmt: skip


def git(args: list[Word], command: Simple) -> Effect:
    """``git diff`` and ``git show`` of named files: what changed in them (``git show
    REV:path``: the file as it was), a part of each; ``git -C dir`` takes the paths from
    ``dir``. A diff of no named file, or one that lists names or counts, reads nothing."""
    directory = None
    while args and args[0].text.startswith("-"):
        if args[0].text == "-C" and len(args) > 1 and args[1].literal:
            directory, args = args[1].text, args[2:]
        elif args[0].text == "-c" and len(args) > 1:
            args = args[2:]
        elif args[0].text in ("--no-pager", "-P", "--no-optional-locks"):
            args = args[1:]
        else:
            return Effect(OTHER)
    if not args or args[0].text not in ("diff", "show"):
        return Effect(OTHER)
    words = [w.text for w in args[1:]]
    if any(w.split("=")[0] in _GIT_LISTING for w in words):
        return Effect(OTHER)
    dashes = words.index("--") if "--" in words else len(words)
    if not all(w.literal for w in args[dashes + 1 :]):
        return Effect(OTHER)
    paths = words[dashes + 1 :]
    paths += [w.text for w in args[1 : dashes + 1] if w.literal and _a_path(w.text)]
    if args[0].text == "show":
        shown = (w.split(":", 1)[1] for w in words[:dashes] if ":" in w and w[:1] != "-")
        paths += [path for path in shown if path]
    if not paths:
        return Effect(OTHER)
    files = tuple(resolve(directory, path) for path in paths)
    return Effect(READ, files, (("git", shlex.join(w for w in words if w not in paths)),))


_GIT_LISTING = frozenset({
    "--stat", "--numstat", "--shortstat", "--name-only", "--name-status", "--summary",
    "--quiet", "--check", "--dirstat", "--compact-summary", "--raw", "--output", "-s",
    "--no-patch", "--oneline", "--format", "--pretty",
})  # fmt: skip


def _a_path(word: str) -> bool:
    """Whether an operand of ``git diff`` before any ``--`` is surely a path, not a
    revision: it has a directory or an extension, and nothing a revision is written with."""
    if word.startswith("-") or any(mark in word for mark in ("..", "^", "~", "@", ":")):
        return False
    return "/" in word or "\\" in word or a_file(word)


def a_file(path: str) -> bool:
    """Whether a path surely names a file, not a directory: its name has an extension
    (``a.go``, not ``src`` nor ``.``)."""
    name = path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return "." in name.lstrip(".") and not path.endswith(("/", "\\"))
