"""File reads that microcompaction keeps whole for a while: what an agent acts on next.

An edit quotes lines of the file the agent read, often several turns later. A read (a
result of a tool the plugins declare as reading a file, :class:`.FileAccess`) is
therefore *protected*: it is not compacted before ``reads.protect_turns`` turns after its
own, unless

* the same file, or the same part of it, is read again, or the file is written, since
  (the read is *superseded*: the newer text is the one to act on); or
* it has left the protected window: the newest ``reads.protect_tokens`` tokens of file
  reads before the boundary.

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

from middleware.steps.file_tools import FileTools
from middleware.view import CallSite, ConversationIndex


@dataclass(frozen=True)
class ReadSettings:
    """``microcompact.reads``, bound as a group of the step's settings."""

    #: Turns a read is protected for at most (0: never protected).
    protect_turns: int
    #: Tokens of the newest reads the protected window holds.
    protect_tokens: int
    #: Distinctive tokens the summary of a read keeps.
    mentions: int


class Protection:
    """The release of every protected result of one request."""

    def __init__(
        self,
        settings: ReadSettings,
        chars_per_token: float,
        index: ConversationIndex,
        *,
        outputs: Sequence[int],
        node_turns: Sequence[int],
        tools: FileTools,
    ) -> None:
        self._released: dict[tuple[int, int], int] = {}
        if not settings.protect_turns:
            return
        per_turn = [0] * index.turn_count
        for turn, chars in zip(node_turns, outputs, strict=True):
            if turn >= 0:
                per_turn[turn] += chars
        before = list(accumulate(per_turn, initial=0))  # read characters before each turn
        window = int(settings.protect_tokens * chars_per_token)
        superseding = _superseding(index.calls, tools)
        for site in index.results:
            if site.turn is None or site.call is None:
                continue
            access = tools.access(site.call.call.name)
            if access is None or access.action != "read":
                continue
            release = site.turn + 1 + settings.protect_turns
            # The first boundary with `window` characters of reads after this one's turn.
            filled = bisect_left(before, before[site.turn + 1] + window)
            if filled < len(before):
                release = min(release, filled)
            arguments = site.call.call.decoded_arguments
            file = access.path(arguments)
            if file is not None:
                keys = ((file, access.part(arguments)), (file, ()), (file, None))
                later = [
                    turn for key in keys for turn in superseding.get(key, ()) if turn > site.turn
                ]
                if later:
                    release = min(release, min(later) + 1)
            self._released[(site.node, site.block)] = release

    def released(self, node: int, block: int) -> int:
        """The first boundary from which the result at ``node``, ``block`` may be
        compacted (0: its age alone decides)."""
        return self._released.get((node, block), 0)


#: A file and the part of it a call reads (``()``: all of it; ``None``: the file written).
_Key = tuple[str, tuple[tuple[str, str], ...] | None]


def _superseding(calls: Sequence[CallSite], tools: FileTools) -> dict[_Key, list[int]]:
    """The turns at which each file, or part of it, is read, and each file written."""
    found: dict[_Key, list[int]] = {}
    for site in calls:
        access = tools.access(site.call.name)
        if access is None:
            continue
        arguments = site.call.decoded_arguments
        file = access.path(arguments)
        if file is None:
            continue
        key: _Key = (file, None) if access.action == "write" else (file, access.part(arguments))
        found.setdefault(key, []).append(site.turn)
    return found
