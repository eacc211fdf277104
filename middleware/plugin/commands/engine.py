"""What a split command line does with files, whatever shell it was written for: each
command's :class:`Effect` (a dialect's programs say it) followed through its pipeline and
the line's directory changes.

A line *reads* only when everything it prints is text of the files it reads: each of its
pipelines reads files (its first command prints them, and each command after it only
keeps some of their lines, :data:`FILTER`), prints nothing of its own (``cd``, ``echo``,
an output sent to a file), and no part of the line runs in the background or in a
construct this package does not follow (a loop, a condition). Writes are every file a
command or a redirection writes, wherever it stands.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import NamedTuple

from middleware.plugin.commands.syntax import Pipeline, Script, Simple, Word
from middleware.plugin.file_use import WHOLE, FileUse, Part

#: Kinds of :class:`Effect`.
READ, FILTER, QUIET, CD, OTHER, UNFOLLOWED = "read", "filter", "quiet", "cd", "other", "?"
#: Where output written is lost.
NULL_DEVICES = frozenset({"/dev/null", "$null", "nul", "NUL"})
_ABSOLUTE = re.compile(r"\A(?:[/\\~]|[A-Za-z]:)")


class Effect(NamedTuple):
    """What one command of a pipeline does. ``READ``: prints ``part`` of each of ``files``;
    ``FILTER``: keeps ``narrow`` of what it is given (read from its input when it is
    first); ``QUIET``: prints nothing that matters; ``CD``: changes to the directory
    ``files[0]`` (none: one not known); ``OTHER``: prints anything; ``UNFOLLOWED``: a
    construct not followed. Each may write ``writes`` and edit ``edits``."""

    kind: str
    files: tuple[str, ...] = ()
    part: Part = WHOLE
    narrow: Callable[[Part], Part] | None = None
    writes: tuple[str, ...] = ()
    edits: tuple[str, ...] = ()


def passing(part: Part) -> Part:
    """The narrowing of a filter that keeps every line (``nl``, ``cat``)."""
    return part


Programs = Callable[[Simple], Effect]
_Stream = list[tuple[str, Part]] | None  # a read's files and parts; None: other output


def follow(script: Script, workdir: str | None, effect_of: Programs) -> FileUse:
    """The files ``script`` reads and writes, its relative paths taken from ``workdir``
    (``None``: left relative); ``effect_of`` tells each command's effect."""
    cwd = workdir
    stack: list[str | None] = []
    reads: list[tuple[str, Part]] = []
    writes: list[str] = []
    edits: list[str] = []
    certain = True
    for item in script:
        if item == "(":
            stack.append(cwd)
        elif item == ")":
            cwd = stack.pop() if stack else cwd
        elif isinstance(item, str):
            certain = False
        else:
            stream, cwd = _pipeline(item, cwd, effect_of, writes, edits)
            if stream is None:
                certain = False
            else:
                reads += stream
    return FileUse(
        tuple(reads) if certain else (), tuple(dict.fromkeys(writes)), tuple(dict.fromkeys(edits))
    )


def _pipeline(
    pipeline: Pipeline,
    cwd: str | None,
    effect_of: Programs,
    writes: list[str],
    edits: list[str],
) -> tuple[_Stream, str | None]:
    """What ``pipeline`` prints (the files and parts it reads, ``[]`` for nothing, ``None``
    for anything else) and the directory after it; its writes and edits are added to
    ``writes`` and ``edits``."""
    stream: _Stream = []
    for k, command in enumerate(pipeline):
        effect = effect_of(command)
        writes += (resolve(cwd, file) for file in effect.writes if file)
        edits += (resolve(cwd, file) for file in effect.edits if file)
        redirected = False
        for stream_of, target in _outputs(command):
            if target.literal and target.text and target.text not in NULL_DEVICES:
                writes.append(resolve(cwd, target.text))
            redirected = redirected or stream_of == "out"
        if effect.kind == UNFOLLOWED:
            stream = None
        elif effect.kind == CD:
            if len(pipeline) == 1:
                cwd = resolve(cwd, effect.files[0]) if effect.files else None
        elif k == 0:
            stream = _first(effect, command, cwd)
        elif effect.kind == FILTER and effect.narrow is not None and stream is not None:
            stream = [(file, effect.narrow(part)) for file, part in stream]
        elif effect.kind == QUIET:
            stream = []  # it takes what it is given and prints nothing of it
        elif not (effect.kind == FILTER and stream == []):
            stream = None
        if redirected and stream is not None:
            stream = []
    return stream, cwd


def _first(effect: Effect, command: Simple, cwd: str | None) -> _Stream:
    """What the first command of a pipeline prints."""
    if effect.kind == READ:
        if not all(effect.files):
            return None
        return [(resolve(cwd, file), effect.part) for file in effect.files]
    if effect.kind == QUIET:
        return []
    if effect.kind == FILTER and effect.narrow is not None:
        sources = [r.target for r in command.redirects if r.op == "<" and r.fd in ("", "0")]
        if len(sources) == 1 and sources[0].literal and sources[0].text:
            return [(resolve(cwd, sources[0].text), effect.narrow(WHOLE))]
        if any(r.op in ("<<", "<<-", "<<<") for r in command.redirects):
            return []  # prints the text the model wrote
    return None


def _outputs(command: Simple) -> list[tuple[str, Word]]:
    """The files ``command`` sends an output to: ``out`` for its output (``> f``,
    ``&> f``), ``err`` for another stream (``2> f``)."""
    found = []
    for r in command.redirects:
        if r.op in (">", ">>", ">|") or (r.op == ">&" and not r.target.text.isdigit()):
            found.append(("out" if r.fd in ("", "1") else "err", r.target))
        elif r.op in ("&>", "&>>"):
            found.append(("out", r.target))
    return [(stream, target) for stream, target in found if target.text != "-"]


def resolve(cwd: str | None, path: str) -> str:
    """``path`` as the command names it, relative to ``cwd`` when both are known."""
    if cwd is None or not path or _ABSOLUTE.match(path):
        return path
    separator = "\\" if "\\" in cwd and "/" not in cwd else "/"
    joined = cwd if path in (".", "./") else cwd.rstrip("/\\") + separator + path
    return posixpath.normpath(joined) if separator == "/" else joined
