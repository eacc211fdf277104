"""Step 3, microcompaction: old tool results are truncated, then summarised, by age.

Cache awareness: ages are measured against a *boundary* that advances every
``schedule.step_turns`` assistant turns (and only once the request is past
``schedule.trigger_tokens``), not against the latest turn. Between two boundary moves the
compacted history is byte-identical, so the provider's prompt cache keeps hitting; each move
rewrites a batch of results at once (:mod:`.schedule` decides when). Everything is derived
from the history alone, so two processes agree. With ``schedule.window_tokens`` set, a
request that would not fit is compacted up to the latest turn, then harder, so it fits
whenever that is possible.

Nothing is lost: the full text of every compacted result is in the spill store, and the
compacted text names the file.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Callable, Sequence

from middleware.plugin.context import StepContext
from middleware.plugin.markers import hookimpl
from middleware.policy.settings import bind
from middleware.session.cold_cache import CallsDigest
from middleware.session.cold_record import ColdMove
from middleware.session.resume import Resume
from middleware.steps.file_tools import read_outputs
from middleware.steps.microcompact.before_spill import promised
from middleware.steps.microcompact.protection import FileActs, Protection, reads_of
from middleware.steps.microcompact.readings import Readings
from middleware.steps.microcompact.rewrite import Plan, Rewrite
from middleware.steps.microcompact.schedule import (
    WARM,
    Carried,
    Decided,
    Gain,
    TurnGains,
    boundary,
    levels_from,
)
from middleware.steps.microcompact.settings import MicrocompactSettings
from middleware.steps.microcompact.weighing import Weighing
from middleware.steps.sizes import node_chars
from middleware.view import Conversation, ConversationIndex, ResultSite, ToolCall

logger = logging.getLogger(__name__)


@hookimpl(tryfirst=True)
def microcompact(conversation: Conversation, context: StepContext) -> None:
    settings = bind(context.policy, MicrocompactSettings)
    # What this plugin promised the budget step (compact_before_spill), whether or not
    # compaction by age is enabled: the budget step's caps count on it.
    requested = promised(context)
    if requested:
        _Compaction(settings, context, conversation).summarize_requested(requested)
    if settings.enabled:
        _Compaction(settings, context, conversation).run()


class _Compaction:
    def __init__(
        self, settings: MicrocompactSettings, context: StepContext, conversation: Conversation
    ) -> None:
        self.recent: set[tuple[int, int]] = set()  # the last keep_results results
        self.settings = settings
        self.context = context
        self.conversation = conversation
        self.readings = Readings(settings, context)
        self.rewrite = Rewrite(settings, context, conversation, self.readings)
        self.tools = self.rewrite.tools
        self.protection: Protection | None = None
        self.weighing = Weighing(
            settings, self.readings, context.internal.cache, self._exempt, self.rewrite.keeps
        )

    def run(self) -> None:
        if self.context.internal.resume is not None:
            self._resume(self.context.internal.resume)
            return
        index = self.conversation.index()
        keep = self.settings.keep_results
        recent = index.results[-keep:] if keep else ()
        self.recent = {(site.node, site.block) for site in recent}
        sizes = [node_chars(node, self.context.codec) for node in self.conversation.nodes]
        outputs = read_outputs(index.results, len(sizes), 0, self.tools)
        turns = index.node_turns
        files = FileActs().extended(index, self.tools)
        self._protect(files, outputs, turns, index.turn_count)
        results, later_summaries = self.weighing.results(index.results, index.turn_count)
        inputs, later_inputs = self.weighing.inputs(index.calls, index.turn_count)
        boundary, decided = self._boundary(results + inputs, sizes, turns, index.turn_count)
        weighed = Carried(
            tuple(results), tuple(inputs), tuple(later_summaries), tuple(later_inputs),
            tuple(sizes), tuple(outputs), turns, boundary, decided, files, (),
        )  # fmt: skip
        self._compact(index, weighed)

    def _compact(self, index: ConversationIndex, weighed: Carried) -> None:
        """Compact what is older than the boundary ``weighed`` found (and released from
        the protected window)."""
        s = self.settings
        turns = index.turn_count
        self.rewrite.size = sum(weighed.sizes)
        if not s.keep_results and s.window_tokens is None:  # nothing else decides: the next
            # request of the session can continue from here, or from before compaction
            before = tuple(self.conversation.nodes)
            self.context.internal.carry = weighed._replace(before=before)
        self.rewrite.apply(
            self._plan(
                index.results, weighed.boundary, s.truncate_turns, s.summarize_turns, protected=True
            )
        )
        self.rewrite.clear_inputs(index.calls, weighed.boundary)
        window = s.window_tokens
        if window is None or self.rewrite.size <= window * s.chars_per_token:
            return
        # Over the window: compact up to the latest turn, then summarise everything
        # older than the last two turns whatever its size.
        for min_size in (s.min_content, 1):
            results = self.conversation.index().results
            self.rewrite.apply(
                self._plan(results, turns, s.truncate_turns, s.summarize_turns, min_size)
            )
            if self.rewrite.size <= window * s.chars_per_token:
                return
            results = self.conversation.index().results
            self.rewrite.apply(
                self._plan(results, turns, s.truncate_turns, s.truncate_turns, min_size)
            )
            if self.rewrite.size <= window * s.chars_per_token:
                return
        logger.warning("request still over the %d-token window after compaction", window)

    def summarize_requested(self, requested: set[tuple[int, int]]) -> None:
        """Summarise the results promised to the budget step (compaction before spill)."""
        index = self.conversation.index()
        self.rewrite.reads = {
            (read.node, read.block): read.read for read in reads_of(index, self.tools)
        }
        self.rewrite.apply(
            [
                Plan(site, "summarize")
                for site in index.results
                if (site.node, site.block) in requested
                and self.readings.compacted_to(site.result.text) != "summarize"
            ]
        )

    def _resume(self, resume: Resume) -> None:
        """Continue the previous request: weigh the new turns' results and inputs beside
        what it weighed. With the same boundary, its messages stay as it compacted them
        (the conversation holds them) and the new turns are too young for compaction.
        A boundary that moves, or new turns before it (the previous request's last turns
        came back changed), compact the whole request again, from the messages as the
        budget step left them (the previous request's, and this one's new turns)."""
        carried = resume.carried.get(self.context.internal.step)
        start = resume.from_node
        if not isinstance(carried, Carried) or not (
            len(carried.sizes)
            == len(carried.outputs)
            == len(carried.node_turns)
            == len(carried.before)
            == start
        ):
            resume.refuse()
            return
        new = self.conversation.index(start, resume.from_turn)
        added_nodes = self.conversation.nodes[start:]
        outputs = carried.outputs + tuple(
            read_outputs(new.results, len(added_nodes), start, self.tools)
        )
        turns = carried.node_turns + new.node_turns
        # What the old calls do with files was found by the requests before: only the new
        # part is asked about (the whole conversation is indexed again only to compact it).
        files = carried.files.extended(new, self.tools)
        self._protect(files, outputs, turns, new.turn_count)
        weighed_on = self.weighing.carried_on(carried, new.turn_count)
        if weighed_on is None:
            resume.refuse()
            return
        results, later_summaries, inputs, later_inputs = weighed_on
        added, pending = self.weighing.results(new.results, new.turn_count)
        later_summaries += [(len(results) + i, node, block) for i, node, block in pending]
        results += added
        added, pending = self.weighing.inputs(new.calls, new.turn_count)
        inputs += added
        later_inputs += pending
        codec = self.context.codec
        sizes = carried.sizes + tuple(node_chars(n, codec) for n in added_nodes)
        moved, decided = self._boundary(
            results + inputs, sizes, turns, new.turn_count, carried.decided
        )
        weighed = Carried(
            tuple(results), tuple(inputs), tuple(later_summaries), tuple(later_inputs),
            sizes, outputs, turns, moved, decided, files, (),
        )  # fmt: skip
        if moved == carried.boundary and resume.from_turn >= moved:
            # The new turns are all after the boundary: too young to compact.
            before = carried.before + tuple(self.conversation.nodes[start:])
            self.context.internal.carry = weighed._replace(before=before)
            return
        nodes = self.conversation.nodes
        for i, made in enumerate(carried.before):
            nodes[i] = made.in_place_of(nodes[i])
        resume.redone.add(self.context.internal.step)
        self._compact(self.conversation.index(), weighed)

    def _protect(
        self, files: FileActs, outputs: Sequence[int], node_turns: Sequence[int], turns: int
    ) -> None:
        """Note the file reads among the results and when each leaves the protected
        window (``outputs``: characters of reads per message, as they came)."""
        self.rewrite.reads = {(read.node, read.block): read.read for read in files.reads}
        s = self.settings
        if self.rewrite.reads and s.reads.protects:
            self.protection = Protection(
                s.reads, s.chars_per_token, files,
                turns=turns, outputs=outputs, node_turns=node_turns,
            )  # fmt: skip

    def _released(self, node: int, block: int) -> int:
        return 0 if self.protection is None else self.protection.released(node, block)

    def _boundary(
        self,
        gains: Sequence[Gain],
        sizes: Sequence[int],
        node_turns: Sequence[int],
        turns: int,
        decided: Decided | None = None,
    ) -> tuple[int, Decided]:
        """This request's boundary (:func:`.schedule.boundary`), from what compacting each
        result and clearing each call's input would remove, and what is decided for good
        (``decided``: an earlier request's), on what the request knows of its session's
        cache (a move made because it is cold is left for the pipeline to record)."""
        s = self.settings
        gains = [
            gain if gain.cleared else gain._replace(released=self._released(gain.node, gain.block))
            for gain in gains
        ]
        turn_gains = TurnGains(
            gains, turns, s.truncate_turns, s.summarize_turns, s.inputs.clear_turns
        )
        cold = self.context.internal.cold_cache
        identify = self._identify(node_turns)
        found = boundary(
            s, turn_gains, sizes, node_turns, turns, decided=decided,
            cold=cold.schedule(identify, follow=s.cold_rewrites) if cold is not None else WARM,
        )  # fmt: skip
        if cold is not None and found.cold is not None:
            cold.made = identify(found.cold)
        return found.turn, found.decided

    def _identify(self, node_turns: Sequence[int]) -> Callable[[int], ColdMove]:
        """What names a move to a turn of this conversation in the session's record:
        the messages before the turn, and the ids of the calls among them. Asked for
        turns in increasing order, it reads each message once."""
        nodes = self.conversation.nodes
        digest, done = CallsDigest(), 0  # the calls of nodes[:done]

        def identify(turn: int) -> ColdMove:
            nonlocal digest, done
            opens = bisect_left(node_turns, turn)
            if opens < done:
                digest, done = CallsDigest(), 0
            for node in nodes[done:opens]:
                for block in node.blocks:
                    if isinstance(block, ToolCall):
                        digest.add(block.id or block.name)
            done = opens
            return ColdMove(turn, opens, digest.value)

        return identify

    def _plan(
        self,
        results: tuple[ResultSite, ...],
        boundary: int,
        truncate_age: int,
        summarize_age: int,
        min_size: int | None = None,
        *,
        protected: bool = False,
    ) -> list[Plan]:
        """What to compact at ``boundary``, by age (and, ``protected``, the results'
        releases from the protected window)."""
        minimum = self.settings.min_content if min_size is None else min_size
        plans = []
        for site in results:
            if site.turn is None or site.turn >= boundary or self._exempt(site):
                continue
            released = self._released(site.node, site.block) if protected else 0
            truncated, summarized = levels_from(site.turn, truncate_age, summarize_age, released)
            level = (
                "summarize" if boundary >= summarized
                else "truncate" if boundary >= truncated
                else None
            )  # fmt: skip
            if level is None:
                continue
            if self.readings.compacted_to(site.result.text) in (level, "summarize"):
                continue
            if self.readings.original_size(site.result) < minimum:
                continue
            plans.append(Plan(site, level))
        return plans

    def _exempt(self, site: ResultSite) -> bool:
        if (site.node, site.block) in self.recent or site.result.sealed:
            return True
        if site.result.is_error and self.settings.keep_errors:
            return True
        return site.tool_name is not None and site.tool_name in self.settings.exempt_tools
