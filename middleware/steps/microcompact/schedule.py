"""When microcompaction rewrites: the boundary before which results are compacted.

Ages are measured against a boundary that advances every ``schedule.step_turns`` assistant
turns, not against the latest turn, so between two moves the compacted history is
byte-identical and the prompt cache keeps hitting. A move rewrites everything after the
first message it changes, uncached: it is made only when what it removes pays for that
within the turns the session is expected to go on for. The step weighs each result and
call input (:class:`Gain`); this module decides from those weights and the message sizes
alone, so deciding costs no I/O and two processes agree.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from itertools import accumulate
from typing import NamedTuple

from middleware.session.cold_cache import ColdCache
from middleware.steps.microcompact.protection import FileActs
from middleware.steps.microcompact.settings import MicrocompactSettings
from middleware.view import Node


class Gain(NamedTuple):
    """What compacting one result removes, or clearing one call's input, and where."""

    turn: int
    node: int
    #: Characters truncating the result removes (0: truncated already, or too short).
    truncated: int = 0
    #: Characters summarising the result removes (0 in the turns never summarised).
    summarized: int = 0
    #: Characters clearing the call's input removes (the gain of an input, not a result).
    cleared: int = 0
    #: The first boundary at which the result may be compacted whatever its age (the
    #: protected window and supersession, :mod:`.protection`); 0: from its age alone.
    released: int = 0
    #: The result's block in its message (results of parallel calls share a message).
    block: int = 0


def levels_from(
    turn: int, truncate_turns: int, summarize_turns: int, released: int = 0
) -> tuple[int, int]:
    """The boundaries from which a result of ``turn`` is truncated, and summarised: its
    age (assistant turns after its own, before the boundary) reaches ``truncate_turns``,
    and the larger of the two ages, and it is ``released``."""
    truncated = max(turn + 1 + truncate_turns, released)
    return truncated, max(turn + 1 + max(summarize_turns, truncate_turns), truncated)


class Decided(NamedTuple):
    """What the schedule decided for the candidates before ``until``: the boundary each
    move set, in order, and which of them were made on a cold cache. Each decision reads
    only the history before its candidate (and the cold moves recorded), so a later
    request of the session, with the same turns before ``until``, decides them alike."""

    until: int = 0
    moves: tuple[int, ...] = ()
    #: The turns moved to because the provider's cache was cold (:class:`.ColdCache`).
    cold: tuple[int, ...] = ()

    def up_to(self, turn: int) -> Decided:
        """The decisions for the candidates before ``turn`` alone."""
        until = min(self.until, turn)
        return Decided(
            until,
            tuple(move for move in self.moves if move < until),
            tuple(move for move in self.cold if move < until),
        )


class Carried(NamedTuple):
    """What the schedule weighed on a request, for the next request of the session to
    start from when it only adds turns: every result's and call input's :class:`Gain`, the
    size and turn of every message before compaction, the boundary, what the calls do
    with files (so the protected window is found without asking of the old calls again),
    and the messages before compaction (to compact again from when the boundary moves).

    A summary's gain is weighed once its result is old enough to be summarised, an
    input's once it is old enough to be cleared (weighing reads the whole text):
    ``later_summaries`` are the results still to weigh (their position in ``results``,
    their node and block), ``later_inputs`` the calls (turn, node, block)."""

    results: tuple[Gain, ...]
    inputs: tuple[Gain, ...]
    later_summaries: tuple[tuple[int, int, int], ...]
    later_inputs: tuple[tuple[int, int, int], ...]
    sizes: tuple[int, ...]
    #: The characters of tool output in every message (the protected window's measure).
    outputs: tuple[int, ...]
    #: The turn of every message (:attr:`.ConversationIndex.node_turns`).
    node_turns: tuple[int, ...]
    boundary: int
    #: The schedule's decisions for good (:class:`Decided`).
    decided: Decided
    #: What the calls do with files, as they came (:class:`.FileActs`).
    files: FileActs
    before: tuple[Node, ...]

    def up_to(self, node: int) -> Carried:
        """What was weighed of the messages before ``node`` (where a turn opens), with
        the same boundary. Results are weighed in message order, so those kept come
        first and keep their positions."""
        kept = sum(1 for gain in self.results if gain.node < node)
        return Carried(
            self.results[:kept],
            tuple(gain for gain in self.inputs if gain.node < node),
            tuple(later for later in self.later_summaries if later[0] < kept),
            tuple(later for later in self.later_inputs if later[1] < node),
            self.sizes[:node],
            self.outputs[:node],
            self.node_turns[:node],
            self.boundary,
            self.decided.up_to(self.node_turns[node]),
            self.files.up_to(node),
            self.before[:node],
        )


class TurnGains:
    """What compaction would remove at every candidate boundary, so each is weighed in
    constant time.

    A result is truncated from the boundary ``truncate_turns`` turns after its own (its
    age), summarised from ``summarize_turns``, neither before it is released
    (:attr:`Gain.released`); a call's input is cleared from ``clear_turns``. Each gain
    changes level at two boundaries at most, so the sums are prefix sums over
    boundaries."""

    def __init__(
        self,
        gains: Iterable[Gain],
        turns: int,
        truncate_turns: int,
        summarize_turns: int,
        clear_turns: int,
    ) -> None:
        self.truncate_turns = truncate_turns
        self.summarize_turns = max(summarize_turns, truncate_turns)
        self.clear_turns = clear_turns
        change: dict[int, int] = {}
        #: Every gain as (node, from which boundary, characters removed from then on),
        #: a level a row: what each boundary removes from each message on.
        self._levels: list[tuple[int, int, int]] = []
        self._suffix: tuple[int, list[int], list[int]] | None = None
        #: The first message each boundary changes (a result changing level, an input
        #: cleared), by the boundary from which it does.
        self.first_changed: dict[int, int] = {}
        for gain in gains:
            if gain.cleared:
                at = max(gain.turn + 1 + clear_turns, 0)
                change[at] = change.get(at, 0) + gain.cleared
                self._changes(at, gain.node)
                self._levels.append((gain.node, at, gain.cleared))
                continue
            at, then = levels_from(gain.turn, truncate_turns, summarize_turns, gain.released)
            change[at] = change.get(at, 0) + gain.truncated
            change[then] = change.get(then, 0) + gain.summarized - gain.truncated
            self._changes(at, gain.node)
            self._changes(then, gain.node)
            self._levels.append((gain.node, at, gain.truncated))
            self._levels.append((gain.node, then, gain.summarized - gain.truncated))
        #: The boundaries at which something changes, and what is removed from each on.
        self.changing = sorted(self.first_changed)
        self._at = sorted(change)
        self._removed = list(accumulate(change[at] for at in self._at))

    def _changes(self, at: int, node: int) -> None:
        if node < self.first_changed.get(at, node + 1):
            self.first_changed[at] = node

    def total(self, boundary: int) -> int:
        """What compaction at ``boundary`` removes."""
        changed = bisect_right(self._at, boundary)
        return self._removed[changed - 1] if changed else 0

    def removed_from(self, boundary: int, node: int) -> int:
        """What compaction at ``boundary`` removes from ``node`` on: a move re-sends the
        messages after the first it changes as the current boundary left them. The sums
        over messages are kept for one boundary (the current one changes only on a
        move)."""
        if self._suffix is None or self._suffix[0] != boundary:
            removed = sorted((n, chars) for n, at, chars in self._levels if at <= boundary)
            nodes = [n for n, _ in removed]
            after = list(accumulate((chars for _, chars in reversed(removed)), initial=0))
            self._suffix = (boundary, nodes, after[::-1])
        _, nodes, after = self._suffix
        return after[bisect_left(nodes, node)]

    def first_changed_node(self, current: int, candidate: int) -> int | None:
        """The first node that compaction at ``candidate`` changes and compaction at
        ``current`` (< ``candidate``) does not: a result ``current`` truncated that
        ``candidate`` summarises, one ``current`` leaves alone that ``candidate``
        compacts, or an input ``candidate`` clears and ``current`` does not."""
        start = bisect_right(self.changing, current)
        nodes = [
            self.first_changed[at]
            for at in self.changing[start : bisect_right(self.changing, candidate)]
        ]
        return min(nodes) if nodes else None


#: A cache the history alone speaks for.
WARM = ColdCache()


class Boundary(NamedTuple):
    """Where :func:`boundary` put the boundary, what is decided for good, and the move
    made because this request found the cache cold (``None``: none), which the session
    records."""

    turn: int
    decided: Decided
    cold: int | None = None


def boundary(
    s: MicrocompactSettings,
    gains: TurnGains,
    sizes: Sequence[int],
    node_turns: Sequence[int],
    turn_count: int,
    *,
    decided: Decided | None = None,
    cold: ColdCache = WARM,
) -> Boundary:
    """The turn before which results are compacted, derived from the history alone (and
    ``cold``), and what is decided for good (the candidates before ``turn_count``).

    Candidates are the multiples of ``step_turns``. The boundary moves to one only when
    the history before it is past the trigger and compacting there pays for the cache it
    breaks: it reclaims at least ``min_reclaim_tokens`` more than the current boundary,
    and enough compared with what the rewrite re-sends uncached (everything after the
    first result that changes) to pay back within the turns the session is expected to go
    on for (``rewrite_cost``, ``expected_turns_factor``, ``expected_turns_min``,
    ``expected_turns_max``), and at least ``min_reclaim_ratio`` times it. On a cold cache
    the rewrite is free: only the trigger and ``min_reclaim_tokens`` apply
    (``cold.none``: to every candidate; ``cold.now``: to the latest, which is then in the
    result's ``cold`` moves; a candidate in ``cold.moved``: as when it was recorded). Each
    decision looks only at the history before the candidate, so later turns never change
    it: ``decided`` (an earlier request's) is taken as it is.
    """
    trigger = s.trigger_tokens * s.chars_per_token
    reclaim = max(s.min_reclaim_tokens * s.chars_per_token, 1)
    starts = list(accumulate(sizes, initial=0))  # characters before each node
    size = starts[-1]
    decided = decided or Decided()
    moves, cold_moves = list(decided.moves), list(decided.cold)
    current = moves[-1] if moves else 0
    step = s.step_turns

    def weigh(candidate: int, free: bool) -> bool:
        """Whether the boundary moves from ``current`` to ``candidate``."""
        # Characters before the candidate turn's first node (the whole request when the
        # turn has not begun).
        opens = bisect_left(node_turns, candidate)
        chars = starts[opens] if opens < len(node_turns) else size
        if chars < trigger:
            return False
        gain = gains.total(candidate) - gains.total(current)
        first_changed = gains.first_changed_node(current, candidate)
        if first_changed is None or gain < reclaim:
            return False
        if free:
            return True
        rewritten = chars - starts[first_changed] - gain
        rewritten = max(rewritten - gains.removed_from(current, first_changed), 1)
        # Removing `gain` saves its reading on every later request; re-sending `rewritten`
        # uncached costs rewrite_cost times reading it once. A session that has lasted
        # `candidate` turns is expected to last about as long again, and no rewrite is
        # bet on more than `expected_turns_max` turns.
        lindy = max(s.expected_turns_factor * candidate, s.expected_turns_min)
        expected = min(lindy, s.expected_turns_max) + 1
        needed = max(s.min_reclaim_ratio, s.rewrite_cost / expected)
        return gain >= needed * rewritten

    first = max(step, -(-decided.until // step) * step)  # the first candidate not decided
    settled = Decided(first, tuple(moves), tuple(cold_moves))
    for candidate in range(first, turn_count + 1, step):
        if candidate >= turn_count and settled.until < candidate:
            settled = Decided(candidate, tuple(moves), tuple(cold_moves))
        if weigh(candidate, cold.none):
            current = candidate
            moves.append(candidate)
            continue
        if candidate in cold.moved and weigh(candidate, True):
            current = candidate
            moves.append(candidate)
            cold_moves.append(candidate)
    if settled.until < turn_count:  # no candidate at or after the last turn was weighed
        settled = Decided(-(-turn_count // step) * step, tuple(moves), tuple(cold_moves))
    latest = turn_count // step * step
    if cold.now and latest > current and weigh(latest, True):
        # The latest candidate, free now: after every other one (the loop's are at most
        # the latest, those decided before it are earlier).
        moves.append(latest)
        cold_moves.append(latest)
        if latest < settled.until:
            settled = Decided(settled.until, tuple(moves), tuple(cold_moves))
        return Boundary(latest, settled, latest)
    return Boundary(current, settled)
