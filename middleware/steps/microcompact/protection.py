"""File reads that microcompaction keeps whole for a while: what an agent acts on next.

An edit quotes lines of the file the agent read, often several turns later. A read (a
result of a tool the plugins declare as reading a file, or of a shell command that
prints one, :class:`.FileAccess`) is therefore *protected*: it is not compacted before
``reads.protect_turns`` turns after its own (a read of a part of a file, such as ``sed -n
'1,200p'``, a ``Read`` with an offset or a ``grep`` of one file: ``reads.protect_part_turns``),
unless

* the same file, or a part of it holding all the read printed, is read again, or the file
  is written, since (the read is *superseded*: the newer text is the one to act on; a
  read of several files, by all of them); paths are compared as
  :mod:`middleware.plugin.file_paths` says (``src/a.ts`` is ``/p/src/a.ts``); or
* it has left the protected window: the newest ``reads.protect_tokens`` tokens of file
  reads before the boundary (``reads.protect_part_tokens`` for a read of a part).

A part is kept longer than a whole file because the agent chose those lines to act on and
they are small to keep: the recorded Codex sessions, which read by line ranges through the
shell, quote their reads mostly 11 to 27 turns later.

Protection ends early rather than late on purpose: compacting a result rewrites
everything after it, uncached, so a read kept long and then compacted costs both the
keeping and a long rewrite.

Each result's *release* is the first boundary from which it may be compacted. It reads only
the history before that boundary, so a later request of the session, or another process,
finds the same release, and between two moves of the schedule's boundary the compacted
history stays byte-identical.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import NamedTuple

from middleware.plugin.file_paths import FileIndex
from middleware.plugin.file_use import WHOLE, FileUse, Part, covers
from middleware.steps.file_tools import FileTools
from middleware.steps.read_back import FileRead
from middleware.view import ConversationIndex


@dataclass(frozen=True)
class ReadSettings:
    """``microcompact.reads``, bound as a group of the step's settings."""

    #: Turns a read is protected for at most (0: never protected).
    protect_turns: int
    #: Tokens of the newest reads the protected window holds.
    protect_tokens: int
    #: The same two bounds for a read of a part of a file.
    protect_part_turns: int
    protect_part_tokens: int
    #: Distinctive tokens the summary of a read keeps.
    mentions: int
    #: Characters of a source file's imports and definitions the summary of a read of
    #: it keeps (:mod:`middleware.steps.definitions`; 0: none).
    definitions_chars: int

    @property
    def protects(self) -> bool:
        """Whether any read is protected (``protect_turns`` 0: none, parts neither)."""
        return self.protect_turns > 0

    def bounds(self, reads: tuple[tuple[str, Part], ...]) -> tuple[int, int]:
        """The turns and tokens a read of ``reads`` (each file and the part printed) is
        protected for: a part's, when it printed a part of every file it read."""
        if all(part != WHOLE for _, part in reads):
            return self.protect_part_turns, self.protect_part_tokens
        return self.protect_turns, self.protect_tokens


class ReadSite(NamedTuple):
    """A result that is a file's text: where it is, its turn, the read it answers and
    each file it printed with the part printed."""

    node: int
    block: int
    turn: int | None
    read: FileRead
    parts: tuple[tuple[str, Part], ...]


class FileActs(NamedTuple):
    """What the calls of a conversation's first messages do with files, asked of the
    plugins once per call: the results that are a file's text, and each call that reads
    or writes a file (its node, turn and use; a text-protocol result stands for its
    command). A call's use depends on the call alone, so a request that continues the
    previous one of its session finds them for its new messages only
    (:class:`.Carried`)."""

    reads: tuple[ReadSite, ...] = ()
    acts: tuple[tuple[int, int, FileUse], ...] = ()

    def extended(self, index: ConversationIndex, tools: FileTools) -> FileActs:
        """These, and those of the messages ``index`` covers (which come after them)."""
        return FileActs(
            self.reads + tuple(reads_of(index, tools)), self.acts + tuple(tools.acts(index))
        )

    def up_to(self, node: int) -> FileActs:
        """What was found of the messages before ``node`` alone."""
        return FileActs(
            tuple(read for read in self.reads if read.node < node),
            tuple(act for act in self.acts if act[0] < node),
        )


def reads_of(index: ConversationIndex, tools: FileTools) -> list[ReadSite]:
    """The results among ``index``'s that are a file's text."""
    found = []
    for site in index.results:
        read = tools.read_of(site)
        if read is not None:
            found.append(ReadSite(site.node, site.block, site.turn, read, tools.use(site).reads))
    return found


class Protection:
    """The release of every protected result of one request."""

    def __init__(
        self,
        settings: ReadSettings,
        chars_per_token: float,
        files: FileActs,
        *,
        turns: int,
        outputs: Sequence[int],
        node_turns: Sequence[int],
    ) -> None:
        """``files``: what the request's calls do with files; ``turns``: its turn
        count; ``outputs`` and ``node_turns``: the characters of reads in, and the turn
        of, every message."""
        self._released: dict[tuple[int, int], int] = {}
        if not settings.protects:
            return
        per_turn = [0] * turns
        for turn, chars in zip(node_turns, outputs, strict=True):
            if turn >= 0:
                per_turn[turn] += chars
        before = list(accumulate(per_turn, initial=0))  # read characters before each turn
        changes = _changes(files)
        for site in files.reads:
            if site.turn is None:
                continue
            bounded_turns, tokens = settings.bounds(site.parts)
            if not bounded_turns:
                continue
            release = site.turn + 1 + bounded_turns
            # The first boundary with the window's characters of reads after this one's turn.
            filled = bisect_left(before, before[site.turn + 1] + int(tokens * chars_per_token))
            if filled < len(before):
                release = min(release, filled)
            superseded = _superseded(site.turn, site.parts, changes)
            if superseded is not None:
                release = min(release, superseded + 1)
            self._released[(site.node, site.block)] = release

    def released(self, node: int, block: int) -> int:
        """The first boundary from which the result at ``node``, ``block`` may be
        compacted (0: its age alone decides)."""
        return self._released.get((node, block), 0)


#: A turn at which a file is read (with the part read) or written (``None``).
_Change = tuple[int, Part | None]


def _changes(files: FileActs) -> FileIndex[_Change]:
    """The turns at which each file, or part of it, is read, and each file written (an
    edit changes a part of a file: the rest of a read of it is still what the next edit
    quotes)."""
    found: FileIndex[_Change] = FileIndex()
    for _, turn, use in files.acts:
        for file, part in use.reads:
            found.add(file, (turn, part))
        for file in use.writes:
            found.add(file, (turn, None))
    return found


def _superseded(
    turn: int, reads: tuple[tuple[str, Part], ...], changes: FileIndex[_Change]
) -> int | None:
    """The turn by which every file a read of ``turn`` printed was read again (all of
    what it printed of it) or written, if each was."""
    latest = None
    for file, part in reads:
        later = [t for t, p in changes.find(file) if t > turn and (p is None or covers(p, part))]
        if not later:
            return None
        latest = max(min(later), latest if latest is not None else -1)
    return latest
