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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from middleware.cache import Identity
from middleware.plugin.context import StepContext
from middleware.plugin.markers import hookimpl
from middleware.policy.settings import bind
from middleware.session.resume import Resume
from middleware.steps.loop_guard import without_notices
from middleware.steps.mentions import error_lines, mentions
from middleware.steps.microcompact.before_spill import SHARED_KEY as COMPACT_FIRST
from middleware.steps.microcompact.content_types import detect_content_type
from middleware.steps.microcompact.inputs import clear_input, clearable_chars
from middleware.steps.microcompact.schedule import Carried, Gain, TurnGains, boundary
from middleware.steps.microcompact.settings import MicrocompactSettings
from middleware.steps.sizes import node_chars
from middleware.view import CallSite, Conversation, ConversationIndex, Node, ResultSite, ToolCall

logger = logging.getLogger(__name__)

#: Where the step leaves what it weighed (:class:`.schedule.Carried`) in the shared state,
#: for the session's next request.
CARRIED = "microcompact.carried"


@dataclass(frozen=True)
class _Plan:
    site: ResultSite
    level: str  # "truncate" | "summarize"


@hookimpl(tryfirst=True)
def microcompact(conversation: Conversation, context: StepContext) -> None:
    settings = bind(context.policy, MicrocompactSettings)
    requested = context.shared.get(COMPACT_FIRST, set())
    if requested:
        _Compaction(settings, context, conversation).summarize_requested(requested)
    if settings.enabled:
        _Compaction(settings, context, conversation).run()


class _Compaction:
    def __init__(
        self, settings: MicrocompactSettings, context: StepContext, conversation: Conversation
    ) -> None:
        self.size = 0  # characters of the request, kept up to date as results shrink
        self.recent: set[tuple[int, int]] = set()  # the last keep_results results
        self.settings = settings
        self.context = context
        self.conversation = conversation
        #: What each text is (written by this step, or the full text it stands for),
        #: verified against the spill store once per text in this run.
        self._states: dict[str, tuple[str | None, str | None]] = {}
        host = context.host
        self._plugins_summarize = host.implements("summarize_result") or host.implements(
            "detect_content_type"
        )

    def run(self) -> None:
        if self.context.resume is not None:
            self._resume(self.context.resume)
            return
        index = self.conversation.index()
        keep = self.settings.keep_results
        recent = index.results[-keep:] if keep else ()
        self.recent = {(site.node, site.block) for site in recent}
        sizes = [node_chars(node, self.context.codec) for node in self.conversation.nodes]
        weighed = tuple(self._result_gains(index.results))
        inputs = tuple(self._input_gains(index.calls))
        turns = index.node_turns
        boundary = self._boundary(weighed + inputs, sizes, turns, index.turn_count)
        self._compact(index, Carried(weighed, inputs, tuple(sizes), turns, boundary, ()))

    def _compact(self, index: ConversationIndex, weighed: Carried) -> None:
        """Compact what is older than the boundary ``weighed`` found."""
        s = self.settings
        turns = index.turn_count
        self.size = sum(weighed.sizes)
        if not s.keep_results and s.window_tokens is None:  # nothing else decides: the next
            # request of the session can continue from here, or from before compaction
            before = tuple(self.conversation.nodes)
            self.context.shared[CARRIED] = weighed._replace(before=before)
        self._apply(
            self._plan(index.results, weighed.boundary, s.truncate_turns, s.summarize_turns)
        )
        self._clear_inputs(index.calls, weighed.boundary)
        window = s.window_tokens
        if window is None or self.size <= window * s.chars_per_token:
            return
        # Over the window: compact up to the latest turn, then summarise everything
        # older than the last two turns whatever its size.
        for min_size in (s.min_content, 1):
            results = self.conversation.index().results
            self._apply(self._plan(results, turns, s.truncate_turns, s.summarize_turns, min_size))
            if self.size <= window * s.chars_per_token:
                return
            results = self.conversation.index().results
            self._apply(self._plan(results, turns, s.truncate_turns, s.truncate_turns, min_size))
            if self.size <= window * s.chars_per_token:
                return
        logger.warning("request still over the %d-token window after compaction", window)

    def summarize_requested(self, requested: set[tuple[int, int]]) -> None:
        """Summarise the results the budget step asked for (compaction before spill)."""
        index = self.conversation.index()
        self._apply(
            [
                _Plan(site, "summarize")
                for site in index.results
                if (site.node, site.block) in requested
                and self._compacted_to(site.result.text) != "summarize"
            ]
        )

    def _resume(self, resume: Resume) -> None:
        """Continue the previous request: weigh the new turns' results and inputs beside
        what it weighed. With the same boundary, its messages stay as it compacted them
        (the conversation holds them) and the new turns are too young for compaction.
        A boundary that moves compacts the whole request again, from the messages as the
        budget step left them (the previous request's, and this one's new turns)."""
        carried = resume.carried.get("microcompact")
        start = resume.from_node
        if not isinstance(carried, Carried) or not (
            len(carried.sizes) == len(carried.node_turns) == len(carried.before) == start
        ):
            resume.refuse()
            return
        new = self.conversation.index(start, resume.from_turn)
        results = carried.results + tuple(self._result_gains(new.results))
        inputs = carried.inputs + tuple(self._input_gains(new.calls))
        codec = self.context.codec
        sizes = carried.sizes + tuple(node_chars(n, codec) for n in self.conversation.nodes[start:])
        turns = carried.node_turns + new.node_turns
        moved = self._boundary(results + inputs, sizes, turns, new.turn_count)
        weighed = Carried(results, inputs, sizes, turns, moved, ())
        if moved == carried.boundary:
            before = carried.before + tuple(self.conversation.nodes[start:])
            self.context.shared[CARRIED] = weighed._replace(before=before)
            return
        nodes = self.conversation.nodes
        for i, made in enumerate(carried.before):
            here = nodes[i]  # the wire message of this request
            nodes[i] = Node(
                made.role, made.blocks, here.raw, here.origin, made.changed, made.meta,
                here.raw_chars,
            )  # fmt: skip
        resume.redone.add(self.context.step)
        self._compact(self.conversation.index(), weighed)

    def _boundary(
        self, gains: tuple[Gain, ...], sizes: Sequence[int], node_turns: Sequence[int], turns: int
    ) -> int:
        """This request's boundary (:func:`.schedule.boundary`), from what compacting each
        result and clearing each call's input would remove."""
        s = self.settings
        turn_gains = TurnGains(
            gains, turns, s.truncate_turns, s.summarize_turns, s.inputs.clear_turns
        )
        return boundary(s, turn_gains, sizes, node_turns, turns)

    def _result_gains(self, sites: Iterable[ResultSite]) -> Iterator[Gain]:
        """What compacting each result would remove, estimated from sizes (deciding costs
        no I/O). Weighed at any age, so that a later request of the session can reuse it:
        the boundary only counts the summaries of the turns it would summarise."""
        s = self.settings
        truncate_kept = s.head_chars + s.tail_chars + 150
        for site in sites:
            if site.turn is None or self._exempt(site):
                continue
            state = self._compacted_to(site.result.text)
            if state == "summarize" or self._original_size(site) < s.min_content:
                continue
            # What compacting can remove: the text as it stands (after the budget step's
            # cut, which a second pass sees as the text itself).
            size = len(site.result.text)
            truncated = max(size - truncate_kept, 0) if state != "truncate" else 0
            summarized = max(size - self._summary_size(self._full_text(site)), 0)
            yield Gain(site.turn, site.node, truncated, summarized)

    def _input_gains(self, sites: Iterable[CallSite]) -> Iterator[Gain]:
        """What clearing each call's input would remove (at any age, as results)."""
        for call in sites:
            removable = clearable_chars(call.call, self.settings.inputs, self.context.cache)
            if removable > 0:
                yield Gain(call.turn, call.node, cleared=removable)

    def _plan(
        self,
        results: tuple[ResultSite, ...],
        boundary: int,
        truncate_age: int,
        summarize_age: int,
        min_size: int | None = None,
    ) -> list[_Plan]:
        minimum = self.settings.min_content if min_size is None else min_size
        plans = []
        for site in results:
            if site.turn is None or site.turn >= boundary or self._exempt(site):
                continue
            age = boundary - 1 - site.turn
            level = (
                "summarize" if age >= summarize_age else "truncate" if age >= truncate_age else None
            )
            if level is None or self._compacted_to(site.result.text) in (level, "summarize"):
                continue
            if self._original_size(site) < minimum:
                continue
            plans.append(_Plan(site, level))
        return plans

    def _original_size(self, site: ResultSite) -> int:
        """Eligibility is judged on the size before any cut (budget preview or truncation)."""
        original = site.result.original
        if original is not None:
            return len(original)
        recovered = self._recovered(site.result.text)
        return len(recovered if recovered is not None else site.result.text)

    def _exempt(self, site: ResultSite) -> bool:
        if (site.node, site.block) in self.recent:
            return True
        if site.result.is_error and self.settings.keep_errors:
            return True
        return site.tool_name is not None and site.tool_name in self.settings.exempt_tools

    def _compacted_to(self, text: str) -> str | None:
        """``summarize`` or ``truncate`` if this step wrote ``text`` (checked against the
        spill store), else ``None``."""
        return self._own(text)[0]

    def _recovered(self, text: str) -> str | None:
        """The full text of a preview or truncation this product wrote, else ``None``."""
        return self._own(text)[1]

    def _own(self, text: str) -> tuple[str | None, str | None]:
        """What this product made of ``text`` (the step's level, the original it stands
        for), read once per text and run, and across requests while the store agrees."""
        found = self._states.get(text)
        if found is None:
            found = self._states[text] = self.context.verified(
                ("microcompact-own", Identity(self.context.policy), text),
                lambda load: self._read_own(text, load),
                lambda _: 100,
                lambda value: (text,) if value[1] is None else (text, value[1]),
            )
        return found

    def _read_own(
        self, text: str, load: Callable[[str], str | None]
    ) -> tuple[str | None, str | None]:
        own = without_notices(text, self.context.policy)
        state = None
        if self.settings.is_summary(own, load):
            state = "summarize"
        elif self.settings.is_truncation(own, load):
            state = "truncate"
        return state, self.settings.recover(own, load)

    def _apply(self, plans: list[_Plan]) -> None:
        for plan in plans:
            site = plan.site
            result = site.result
            current = result.text
            # Work from the full text: the budget step hands it on when it spilled the
            # result in this call; a result compacted earlier names its file. The pointer
            # then names the same file and the counts are the original's.
            text = self._full_text(site)
            path = self._save(site, text)
            if path is None:
                continue
            if plan.level == "truncate":
                new = self.settings.truncate(text, path)
            else:
                new = self._summary(text, site.tool_name, path)
            if new is None or len(new) >= len(current):
                continue
            self.conversation.replace_block(site.node, site.block, result.with_text(new))
            self.size -= len(current) - len(new)
            self.context.record(
                "truncated" if plan.level == "truncate" else "summarized",
                tool_call_id=result.call_id, tool_name=site.tool_name,
                message_index=self.conversation.nodes[site.node].origin,
                chars_before=len(current), chars_after=len(new), age=site.age, path=path,
            )  # fmt: skip

    def _summary(self, text: str, tool_name: str | None, path: str) -> str | None:
        """The summary of ``text``, saved at ``path``. Plugins that summarise or name
        content types are asked every time (their answer is theirs to cache); without
        them, the summary depends on the text, the path and the policy alone and is made
        once, however many requests carry the result."""

        def built_in(kind: str | None = None) -> str | None:
            found, errors, detected, _ = self._read(text)
            kind = kind or detected
            return self.settings.summarize(text, path, kind, list(found), list(errors))

        if self._plugins_summarize:
            kind = self.context.content_type(text, tool_name)
            found = self.context.summary(
                text, tool_name, kind or self._read(text).content_type, path
            )
            return found if found is not None else built_in(kind)
        return self.context.cache.derive(
            ("summary", Identity(self.context.policy), text, path),
            built_in,
            lambda summary: 0 if summary is None else len(summary),
            (text,),
        )

    def _clear_inputs(self, calls: tuple[CallSite, ...], boundary: int) -> None:
        """Clear the long strings of old calls' inputs (:mod:`.inputs`), from
        ``inputs.clear_turns``, before the same boundary as results."""
        settings = self.settings.inputs
        if not settings.tools:
            return
        for site in calls:
            if boundary - 1 - site.turn < settings.clear_turns:
                continue
            call = self.conversation.nodes[site.node].blocks[site.block]
            if not isinstance(call, ToolCall):
                continue
            key = f"{call.id or call.name}-input"

            def save(text: str, key: str = key) -> str:
                return self.context.spill.save(key, text, suffix=".json")

            try:
                cleared = clear_input(call, settings, save, self.context.cache)
            except OSError as exc:
                self.context.record(
                    "compaction_skipped", tool_call_id=call.id, tool_name=call.name,
                    message_index=self.conversation.nodes[site.node].origin, error=str(exc),
                )  # fmt: skip
                continue
            if cleared is None:
                continue
            new_call, path, before, after = cleared
            self.conversation.replace_block(site.node, site.block, new_call)
            self.size -= before - after
            self.context.record(
                "input_cleared", tool_call_id=call.id, tool_name=call.name,
                message_index=self.conversation.nodes[site.node].origin,
                chars_before=before, chars_after=after, age=boundary - 1 - site.turn, path=path,
            )  # fmt: skip

    def _full_text(self, site: ResultSite) -> str:
        """The text a summary of the result is made from: the budget step hands it on
        when it spilled the result in this call; a result compacted earlier names its file."""
        result = site.result
        return result.original if result.original is not None else self._recover(result.text)

    def _recover(self, text: str) -> str:
        """The original of a preview or truncation made earlier, read back from the spill
        store; ``text`` itself when it is neither or the store no longer has it."""
        recovered = self._recovered(text)
        return text if recovered is None else recovered

    def _save(self, site: ResultSite, text: str) -> str | None:
        key = site.result.call_id or site.tool_name or "result"
        try:
            return self.context.spill.save(key, text)
        except OSError as exc:
            self.context.record(
                "compaction_skipped", tool_call_id=site.result.call_id, tool_name=site.tool_name,
                message_index=self.conversation.nodes[site.node].origin,
                chars_before=len(text), chars_after=len(text), error=str(exc),
            )  # fmt: skip
            return None

    def _summary_size(self, text: str) -> int:
        """About what a summary of ``text`` keeps: its line, its mentions, its errors."""
        return self._read(text).summary_size

    def _read(self, text: str) -> _Parts:
        """What a summary keeps of ``text`` (its mentions and error lines) and its detected
        content type: read once per text and settings, however many requests repeat it."""
        count, lines = self.settings.mentions, self.settings.error_lines

        def read() -> _Parts:
            found = tuple(mentions(text, count))
            errors = tuple(error_lines(text, lines))
            size = 200 + sum(len(m) + 2 for m in found) + sum(len(e) + 13 for e in errors)
            return _Parts(found, errors, detect_content_type(text), size)

        return self.context.cache.derive(
            ("summary-parts", text, count, lines), read, _parts_size, (text,)
        )


class _Parts(NamedTuple):
    """What a summary of a result is made of, and about how long it is."""

    mentions: tuple[str, ...]
    errors: tuple[str, ...]
    content_type: str
    #: Every request weighs every old result by it: added up once.
    summary_size: int


def _parts_size(parts: _Parts) -> int:
    return 100 + sum(len(m) + 60 for m in parts.mentions) + sum(len(e) + 60 for e in parts.errors)
