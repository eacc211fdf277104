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

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import accumulate
from typing import NamedTuple

from middleware.session.cold_cache import ColdCache
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
    size and turn of every message before compaction, the boundary, and the messages
    before compaction (to compact again from when the boundary moves).

    A summary's gain is weighed once its result is old enough to be summarised, an
    input's once it is old enough to be cleared (weighing reads the whole text):
    ``later_summaries`` are the results still to weigh (their position in ``results``,
    their node and block), ``later_inputs`` the calls (turn, node, block)."""

    results: tuple[Gain, ...]
    inputs: tuple[Gain, ...]
    later_summaries: tuple[tuple[int, int, int], ...]
    later_inputs: tuple[tuple[int, int, int], ...]
    sizes: tuple[int, ...]
    #: The turn of every message (:attr:`.ConversationIndex.node_turns`).
    node_turns: tuple[int, ...]
    boundary: int
    #: The schedule's decisions for good (:class:`Decided`).
    decided: Decided
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
            self.node_turns[:node],
            self.boundary,
            self.decided.up_to(self.node_turns[node]),
            self.before[:node],
        )


class TurnGains:
    """Per-turn prefix sums of what compaction would remove, so every candidate boundary
    is weighed in constant time."""

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
        by_truncate = [0] * turns
        by_summary = [0] * turns
        by_clearing = [0] * turns
        #: The first message of each turn that compacting results changes, and that
        #: clearing inputs does.
        self.first_result: dict[int, int] = {}
        self.first_input: dict[int, int] = {}
        for gain in gains:
            by_truncate[gain.turn] += gain.truncated
            by_summary[gain.turn] += gain.summarized
            by_clearing[gain.turn] += gain.cleared
            first = self.first_input if gain.cleared else self.first_result
            if gain.node < first.get(gain.turn, gain.node + 1):
                first[gain.turn] = gain.node
        self.result_turns = sorted(self.first_result)
        self.input_turns = sorted(self.first_input)
        self.truncated = list(accumulate(by_truncate, initial=0))
        self.summarized = list(accumulate(by_summary, initial=0))
        self.cleared = list(accumulate(by_clearing, initial=0))

    def total(self, boundary: int) -> int:
        """What compaction at ``boundary`` removes: results older than ``summarize_turns``
        summarised, those older than ``truncate_turns`` truncated, and inputs older than
        ``clear_turns`` cleared."""
        summarized = max(boundary - self.summarize_turns, 0)
        truncated = max(boundary - self.truncate_turns, summarized)
        cleared = max(boundary - self.clear_turns, 0)
        return (
            self.summarized[summarized]
            + self.truncated[truncated]
            - self.truncated[summarized]
            + self.cleared[cleared]
        )

    def first_changed_node(self, current: int, candidate: int) -> int | None:
        """The first node that compaction at ``candidate`` changes and compaction at
        ``current`` (< ``candidate``) does not: a result ``current`` truncated that
        ``candidate`` summarises, one ``current`` leaves alone that ``candidate``
        compacts, or an input ``candidate`` clears and ``current`` does not."""
        found = None
        start = bisect_left(self.result_turns, current - self.summarize_turns)
        for turn in self.result_turns[start:]:
            if turn >= candidate - self.truncate_turns:
                break
            if turn >= current - self.truncate_turns or turn < candidate - self.summarize_turns:
                found = self.first_result[turn]
                break
        start = bisect_left(self.input_turns, current - self.clear_turns)
        if start < len(self.input_turns):
            turn = self.input_turns[start]
            if turn < candidate - self.clear_turns:
                node = self.first_input[turn]
                found = node if found is None else min(found, node)
        return found


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
    on for (``rewrite_cost``, ``expected_turns_factor``, ``expected_turns_min``), and at
    least ``min_reclaim_ratio`` times it. On a cold cache the rewrite is free: only the
    trigger and ``min_reclaim_tokens`` apply (``cold.none``: to every candidate;
    ``cold.now``: to the latest, which is then in the result's ``cold`` moves; a candidate
    in ``cold.moved``: as when it was recorded). Each decision looks only at the history
    before the candidate, so later turns never change it: ``decided`` (an earlier
    request's) is taken as it is.
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
        rewritten = max(chars - starts[first_changed] - gain, 1)
        # Removing `gain` saves its reading on every later request; re-sending `rewritten`
        # uncached costs rewrite_cost times reading it once. A session that has lasted
        # `candidate` turns is expected to last about as long again.
        expected = max(s.expected_turns_factor * candidate, s.expected_turns_min) + 1
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
