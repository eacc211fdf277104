"""One budget pass over one conversation: turn by turn, which cap and line rule each
result gets, what an earlier decision already made of it, and which results are cut
(:mod:`.spilling` cuts them, :mod:`.turn_budget` fits a turn over its budget).

Decisions depend only on the result, its turn and the policy, so the same history always
gives the same bytes (prompt-cache stability), and a preview is recognised as one, so
processing the output again changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from middleware.cache import Identity
from middleware.plugin.admission import Cap
from middleware.plugin.context import StepContext, compaction_promised, file_access, verified
from middleware.policy.templates import fill
from middleware.report import ActionKind
from middleware.steps.budget.line_rules import LineRule, line_rule, recover_line_cut
from middleware.steps.budget.settings import GENERIC_CAP, BudgetSettings, TurnLimits, resolve_cap
from middleware.steps.budget.spilling import Candidate, Spilling
from middleware.steps.budget.turn_budget import fit_turn
from middleware.steps.file_text import is_log_file
from middleware.steps.file_tools import FileTools, answer_commands
from middleware.steps.notices import without_notices
from middleware.steps.previews import recover_preview
from middleware.steps.sizes import chars_before_turns, node_chars
from middleware.view import Conversation, ResultSite, ToolResult


@dataclass(frozen=True)
class Dispatch:
    """What admission at dispatch (``admit_outputs``) says about the calls admitted, which
    a request-time run reads from the history itself."""

    parallel_calls: int
    context_chars: int | None


class BudgetRun:
    """One budget pass over one conversation."""

    def __init__(
        self,
        settings: BudgetSettings,
        context: StepContext,
        conversation: Conversation,
        dispatch: Dispatch | None = None,
    ) -> None:
        self.settings = settings
        self.context = context
        self.conversation = conversation
        #: Set when admitting outputs at dispatch, before they enter the history.
        self.dispatch = dispatch
        self._caps: dict[str | None, Cap] = {}
        self._rules: dict[str | None, LineRule | None] = {}
        #: What the tools do with files: a cut file read says to read the file again.
        self.files = FileTools(
            partial(file_access, context), answer_commands(conversation, context.codec)
        )
        self.spilling = Spilling(settings, context, conversation, self.files)

    def run(self) -> None:
        # Continuing the previous request: its turns are as it left them, the new ones
        # are decided here. Decisions that read the history before a turn (the
        # context-aware ceilings) or the ledger are made in full.
        resume = self.context.internal.resume
        if resume is None:
            index = self.conversation.index()
        elif self.settings.aware is not None or self.settings.freeze_decisions:
            resume.refuse()
            return
        else:
            index = self.conversation.index(resume.from_node, resume.from_turn)
        by_turn: dict[int | None, list[ResultSite]] = defaultdict(list)
        for site in index.results:
            by_turn[site.turn].append(site)
        admission = self.dispatch
        used: dict[int, int] = {}
        if self.settings.aware is not None and admission is None:
            sizes = [node_chars(node, self.context.codec) for node in self.conversation.nodes]
            used = chars_before_turns(sizes, index.node_turns)
        for turn, sites in by_turn.items():
            calls = len(sites) if admission is None else admission.parallel_calls
            history = None
            if turn is not None:
                history = admission.context_chars if admission is not None else used.get(turn)
            limits = TurnLimits.of(self.settings, calls, history)
            aware = self.settings.aware
            if (
                aware is not None
                and aware.compact_before_spill
                and turn is not None
                and history is not None
                and aware.tight(history)
                and self._would_cut(sites, limits)
            ):
                # The plugin that answers promises to compact those results later in
                # this call; with none (microcompaction blocked), the history counts as
                # it is.
                reclaimed = compaction_promised(self.context, index, turn - aware.protect_turns)
                if reclaimed is not None:
                    history = max(history - reclaimed, 0)
                    limits = TurnLimits.of(self.settings, calls, history)
            candidates = [self._candidate(site, limits) for site in sites]
            for cand in candidates:
                if cand.frozen:
                    continue
                if cand.rule is not None:
                    self.spilling.shape(cand, cand.rule)
                elif cand.cap.max_chars is not None and self._over_cap(cand, cand.cap.max_chars):
                    self.spilling.spill_to(cand, cand.cap.max_chars, "result_cap")
            if self.settings.turn_strategy == "largest_first" and limits.budget is not None:
                fit_turn(self.spilling, candidates, limits.budget)
            self._remember(candidates)

    def _over_cap(self, cand: Candidate, cap: int) -> bool:
        """Whether ``cand`` is over its ``cap`` by enough for a cut to be worth what it
        hides: a preview of at most the cap takes off ``min_saving`` of the result."""
        size = len(cand.result.text)
        return size > cap and size - cap >= self.settings.min_saving * size

    def _would_cut(self, sites: list[ResultSite], limits: TurnLimits) -> bool:
        """Whether the turn's results are over their caps or the turn over its budget
        (compaction before spill is only worth its cache break then)."""
        sizes = [len(site.result.text) for site in sites]
        if limits.budget is not None and sum(sizes) > limits.budget:
            return True
        for site, size in zip(sites, sizes, strict=True):
            cap = limits.cap_for(self._site_cap(site))
            if cap.max_chars is not None and size > cap.max_chars:
                return True
        return False

    def _candidate(self, site: ResultSite, limits: TurnLimits) -> Candidate:
        incoming = site.result.text
        cap = limits.cap_for(self._site_cap(site))
        if site.result.sealed:  # nested too deep to read: sent as it came
            return Candidate(site, site.result, cap, True, None, incoming)
        decided = self._decided(site)
        if decided is not None:
            return Candidate(site, decided, cap, True, None, incoming)
        result = self._replace_empty(site)
        rule = self._rule(site.tool_name)
        if rule is not None:
            load = self.context.spill.load
            text = without_notices(result.text, self.context.policy)
            arguments = site.call.call.arguments if site.call is not None else None
            tool = site.tool_name or "tool"
            own = recover_line_cut(text, rule, load, arguments=arguments, tool=tool)
            frozen = own is not None
        else:
            frozen = cap.max_chars is None or self._is_preview(result.text)
        return Candidate(site, result, cap, frozen, rule, incoming)

    def _is_preview(self, text: str) -> bool:
        """Whether ``text`` is a preview this step wrote (verified against the store once
        per text, not on every request that carries it)."""
        policy = self.context.policy

        def read(load: Callable[[str], str | None]) -> bool:
            own = without_notices(text, policy)
            return recover_preview(own, self.settings.preview, load) is not None

        return verified(
            self.context,
            ("budget-preview", Identity(policy), text),
            read,
            lambda _: 100,
            lambda _: (text,),
        )

    def _site_cap(self, site: ResultSite) -> Cap:
        """The cap of one result: its tool's, except that a file read the tool bounds only
        by the generic per-result cap (a shell tool's ``sed -n '1,200p' f``) is bounded as
        a tool that opts in is, by ``budget.per_tool_default_chars``: it is what the next
        edit quotes, and the read tools' own bounds are larger still."""
        cap = self._cap(site.tool_name)
        read = self.files.read_of(site) if cap.source == GENERIC_CAP else None
        if read is None or is_log_file(read.file):  # a log file's lines are a log's
            return cap
        chars = self.settings.per_tool_default_chars
        if cap.max_chars is None or chars <= cap.max_chars:
            return cap
        return Cap(chars, f"budget.per_tool_default_chars (a read of a file by {site.tool_name})")

    def _cap(self, tool_name: str | None) -> Cap:
        """The tool's cap, resolved once per tool and request (a plugin's declaration is
        asked for once, however many results the tool has)."""
        cap = self._caps.get(tool_name)
        if cap is None:
            cap = self._caps[tool_name] = resolve_cap(tool_name, self.settings, self.context)
        return cap

    def _rule(self, tool_name: str | None) -> LineRule | None:
        """The tool's line rule, looked up once per tool and request."""
        if tool_name not in self._rules:
            self._rules[tool_name] = line_rule(self.context.policy, tool_name)
        return self._rules[tool_name]

    def _decided(self, site: ResultSite) -> ToolResult | None:
        """The result as an earlier decision for its call id made it, if one applies."""
        ledger = self.context.internal.decisions
        result = site.result
        if ledger is None or not result.call_id or result.text_protocol:
            return None
        decision = ledger.lookup(result.call_id, result.text)
        if decision is None:
            return None
        if decision.made_by == "request" and not self.settings.freeze_decisions:
            return None
        text = decision.outcome(result.text)
        if text == result.text:
            return result
        replayed = result.with_text(text, original=result.text)
        self.spilling.replace(site, replayed)
        self.spilling.record(
            ActionKind.DECISION_REPLAYED,
            site,
            len(result.text),
            len(text),
            made_by=decision.made_by,
        )
        return replayed

    def _remember(self, candidates: list[Candidate]) -> None:
        ledger = self.context.internal.decisions
        if ledger is None or not self.settings.freeze_decisions:
            return
        for cand in candidates:
            result = cand.result
            if result.call_id and not result.text_protocol:
                ledger.record(result.call_id, cand.incoming, result.text, "request")

    def _replace_empty(self, site: ResultSite) -> ToolResult:
        result = site.result
        template = self.settings.empty_result_text
        if template is None or result.text_protocol or _has_text(result.text):
            return result
        if not self.context.codec.empty_result_needs_text:
            return result
        if result.has_non_text:
            return result
        text = fill(template, {}, {"tool": site.tool_name or "tool"})
        self.spilling.replace(site, result.with_text(text))
        self.spilling.record(ActionKind.EMPTY_REPLACED, site, len(result.text), len(text))
        return result.with_text(text)


def _has_text(text: str) -> bool:
    """``bool(text.strip())`` without copying a 50 MB text: ``isspace`` stops at the first
    character that is not blank."""
    return bool(text) and not text.isspace()
