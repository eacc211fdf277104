"""What compaction would remove, result by result and call by call: the :class:`.Gain`
the schedule decides from (estimated from sizes: deciding costs no I/O).

A summary's gain is weighed once its result is old enough to be summarised, and a call
input's once it is old enough to be cleared: the last turns never are, and weighing reads
the whole text (a 50 MB result just returned would be read on every request). What is not
weighed yet is listed, so a request that continues the previous one of its session
(:class:`.Carried`) weighs only what has come of age since.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from middleware.cache import DerivedCache
from middleware.steps.microcompact.inputs import clearable_chars
from middleware.steps.microcompact.readings import Keeps, Readings
from middleware.steps.microcompact.schedule import Carried, Gain
from middleware.steps.microcompact.settings import MicrocompactSettings
from middleware.view import CallSite, ResultSite, ToolCall, ToolResult

#: A result whose summary is not weighed yet (its position in the gains, node, block), or
#: a call whose input is not (turn, node, block).
Later = tuple[int, int, int]


class Weighing:
    """Gains of one request's results and call inputs."""

    def __init__(
        self,
        settings: MicrocompactSettings,
        readings: Readings,
        cache: DerivedCache,
        exempt: Callable[[ResultSite], bool],
        keeps: Callable[[int, int], Keeps],
    ) -> None:
        self.settings = settings
        self.readings = readings
        self.cache = cache
        self.exempt = exempt
        #: What the summary of the result at (node, block) keeps at most.
        self.keeps = keeps

    def results(self, sites: Iterable[ResultSite], turns: int) -> tuple[list[Gain], list[Later]]:
        """What compacting each result would remove, of ``turns`` turns; the results
        whose summary is to be weighed later come second."""
        s = self.settings
        summarised_before = turns - max(s.summarize_turns, s.truncate_turns)
        truncate_kept = s.head_chars + s.tail_chars + 150
        gains: list[Gain] = []
        later: list[Later] = []
        for site in sites:
            if site.turn is None or self.exempt(site):
                continue
            state = self.readings.compacted_to(site.result.text)
            if state == "summarize" or self.readings.original_size(site.result) < s.min_content:
                continue
            # What compacting can remove: the text as it stands (after the budget step's
            # cut, which a second pass sees as the text itself).
            size = len(site.result.text)
            truncated = max(size - truncate_kept, 0) if state != "truncate" else 0
            summarized = 0
            if site.turn < summarised_before:
                summarized = self.summary_gain(site.result, site.node, site.block)
            else:
                later.append((len(gains), site.node, site.block))
            gains.append(Gain(site.turn, site.node, truncated, summarized, block=site.block))
        return gains, later

    def inputs(self, sites: Iterable[CallSite], turns: int) -> tuple[list[Gain], list[Later]]:
        """What clearing each old call's input would remove, of ``turns`` turns; the calls
        too young to be cleared come second."""
        cleared_before = turns - self.settings.inputs.clear_turns  # later inputs stay
        gains: list[Gain] = []
        later: list[Later] = []
        for call in sites:
            if call.turn >= cleared_before:
                later.append((call.turn, call.node, call.block))
                continue
            if call.call.sealed:
                continue
            removable = clearable_chars(call.call, self.settings.inputs, self.cache)
            if removable > 0:
                gains.append(Gain(call.turn, call.node, cleared=removable))
        return gains, later

    def carried_on(
        self, carried: Carried, turns: int
    ) -> tuple[list[Gain], list[Later], list[Gain], list[Later]] | None:
        """The gains ``carried`` from the previous request, with what has come of age by
        ``turns`` turns weighed now: results and those still to weigh, inputs and those
        still to weigh. ``None`` when a message is not what was carried."""
        s = self.settings
        summarised_before = turns - max(s.summarize_turns, s.truncate_turns)
        results, later_results = list(carried.results), []
        for position, node, block in carried.later_summaries:
            gain = results[position]
            if gain.turn >= summarised_before:
                later_results.append((position, node, block))
                continue
            result = carried.before[node].blocks[block]
            if not isinstance(result, ToolResult):
                return None
            results[position] = gain._replace(summarized=self.summary_gain(result, node, block))
        cleared_before = turns - s.inputs.clear_turns
        inputs, later_inputs = list(carried.inputs), []
        for turn, node, block in carried.later_inputs:
            if turn >= cleared_before:
                later_inputs.append((turn, node, block))
                continue
            call = carried.before[node].blocks[block]
            if not isinstance(call, ToolCall):
                return None
            removable = clearable_chars(call, s.inputs, self.cache)
            if removable > 0:
                inputs.append(Gain(turn, node, cleared=removable))
        return results, later_results, inputs, later_inputs

    def summary_gain(self, result: ToolResult, node: int, block: int) -> int:
        """What summarising ``result`` (at ``node``, ``block``) removes (the summary is of
        its full text)."""
        full = self.readings.full_text(result)
        size = self.readings.summary_size(full, self.keeps(node, block))
        return max(len(result.text) - size, 0)
