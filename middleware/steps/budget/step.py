"""Step 2, budget enforcement: per-tool, per-result and per-turn caps.

A result over its cap is saved whole to the session's spill store and replaced by a
preview that says where the full text is. Decisions depend only on the result, its turn
and the policy, so the same history always gives the same bytes (prompt-cache stability),
and a preview is recognised as one, so processing the output again changes nothing.

When the context is tight, the step asks the ``compact_before_spill`` hook how much the
compaction of old results will give back before it lowers a new result's cap; it imports
no other step, and with no plugin answering (microcompaction blocked) its caps count the
history as it is, so they hold on their own.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from middleware.cache import Identity
from middleware.plugin.admission import Cap
from middleware.plugin.context import StepContext, compaction_promised, file_access, verified
from middleware.plugin.markers import hookimpl
from middleware.policy.quoting import prose
from middleware.policy.settings import bind
from middleware.policy.templates import fill
from middleware.report import ActionKind
from middleware.steps.budget.line_rules import LineRule, cut_lines, line_rule, recover_line_cut
from middleware.steps.budget.settings import GENERIC_CAP, BudgetSettings, TurnLimits, resolve_cap
from middleware.steps.file_text import is_log_file
from middleware.steps.file_tools import FileTools, answer_commands
from middleware.steps.notices import without_notices
from middleware.steps.previews import could_shorten, fit_preview, make_preview, recover_preview
from middleware.steps.sizes import chars_before_turns, node_chars
from middleware.view import Conversation, ResultSite, ToolResult

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Dispatch:
    """What admission at dispatch (``admit_outputs``) says about the calls admitted, which
    a request-time run reads from the history itself."""

    parallel_calls: int
    context_chars: int | None


@dataclass
class _Candidate:
    site: ResultSite
    result: ToolResult
    cap: Cap
    frozen: bool  # already a preview, decided earlier, or exempt: never cut again
    rule: LineRule | None = None
    incoming: str = ""  # the text the request carried, for the decision ledger


@hookimpl(tryfirst=True)
def result_cap(
    tool_name: str, parallel_calls: int, context_chars: int | None, context: StepContext
) -> Cap:
    """The cap a result of ``tool_name`` gets at dispatch time (``Pipeline.result_budget``)."""
    settings = bind(context.policy, BudgetSettings)
    if not settings.enabled:
        return Cap(None, "budget.enabled is false")
    limits = TurnLimits.of(settings, parallel_calls, context_chars)
    return limits.cap_for(resolve_cap(tool_name, settings, context))


@hookimpl(tryfirst=True)
def enforce_budget(conversation: Conversation, context: StepContext) -> None:
    settings = bind(context.policy, BudgetSettings)
    if settings.enabled:
        _BudgetRun(settings, context, conversation).run()


@hookimpl(tryfirst=True)
def admit_outputs(
    conversation: Conversation, parallel_calls: int, context_chars: int | None, context: StepContext
) -> None:
    """The step at dispatch: the outputs of calls dispatched together, bounded as one turn
    (``Pipeline.admit``)."""
    settings = bind(context.policy, BudgetSettings)
    if settings.enabled:
        dispatch = Dispatch(parallel_calls, context_chars)
        _BudgetRun(settings, context, conversation, dispatch).run()


class _BudgetRun:
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
                    self._shape(cand, cand.rule)
                elif cand.cap.max_chars is not None and self._over_cap(cand, cand.cap.max_chars):
                    self._spill_to(cand, cand.cap.max_chars, "result_cap")
            if self.settings.turn_strategy == "largest_first" and limits.budget is not None:
                self._fit_turn(candidates, limits.budget)
            self._remember(candidates)

    def _over_cap(self, cand: _Candidate, cap: int) -> bool:
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

    def _candidate(self, site: ResultSite, limits: TurnLimits) -> _Candidate:
        incoming = site.result.text
        cap = limits.cap_for(self._site_cap(site))
        if site.result.sealed:  # nested too deep to read: sent as it came
            return _Candidate(site, site.result, cap, True, None, incoming)
        decided = self._decided(site)
        if decided is not None:
            return _Candidate(site, decided, cap, True, None, incoming)
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
        return _Candidate(site, result, cap, frozen, rule, incoming)

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
        self._replace(site, replayed)
        self._record(
            ActionKind.DECISION_REPLAYED,
            site,
            len(result.text),
            len(text),
            made_by=decision.made_by,
        )
        return replayed

    def _remember(self, candidates: list[_Candidate]) -> None:
        ledger = self.context.internal.decisions
        if ledger is None or not self.settings.freeze_decisions:
            return
        for cand in candidates:
            result = cand.result
            if result.call_id and not result.text_protocol:
                ledger.record(result.call_id, cand.incoming, result.text, "request")

    def _shape(self, cand: _Candidate, rule: LineRule) -> None:
        """Bound a result by its tool's line rule (pi), the full text saved first."""
        cut = cut_lines(cand.result.text, rule)
        if cut is None:
            return
        path = self._save(cand)
        if isinstance(path, OSError):
            self._spill_failed(cand, rule.limits.max_bytes, "line_rule", str(path))
            return
        arguments = cand.site.call.call.arguments if cand.site.call is not None else None
        shaped = cut.render(path=path, arguments=arguments, tool=cand.site.tool_name or "tool")
        self._apply(cand, path, shaped, "line_rule")

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
        self._replace(site, result.with_text(text))
        self._record(ActionKind.EMPTY_REPLACED, site, len(result.text), len(text))
        return result.with_text(text)

    def _fit_turn(self, candidates: list[_Candidate], budget: int) -> None:
        """Spill the turn's largest results first until the turn fits its budget.

        Each spilled result keeps as much as the turn can afford, and at least the
        standard preview; only if that is not enough are those previews shrunk, down to
        the bare marker, so the turn fits whenever that is possible at all.
        """
        total = sum(len(c.result.text) for c in candidates)
        if total <= budget:
            return
        style, session = self.settings.preview, self.context.session_id
        plan: list[tuple[_Candidate, str, str]] = []  # candidate, path, preview
        for cand in sorted(
            (c for c in candidates if not c.frozen),
            key=lambda c: (-len(c.result.text), c.site.node, c.site.block),
        ):
            if total <= budget:
                break
            text, tool = cand.result.text, cand.site.tool_name
            if not could_shorten(
                text, style, path=self._location(cand), tool=tool, session=session
            ):
                continue  # no preview is shorter: nothing to save (20,000 tiny results
                # in one turn once meant 20,000 files nothing named)
            path = self._save(cand)
            if isinstance(path, OSError):
                total -= len(text) - len(
                    self._spill_failed(cand, len(text) - (total - budget), "turn_budget", str(path))
                )
                continue
            file = self.files.read_of(cand.site)
            standard = make_preview(
                text, style, path=path, tool=tool, cache=self.context.internal.kept,
                session=session, file=file,
            )  # fmt: skip
            floor = len(standard) if standard is not None else 0
            target = max(len(text) - (total - budget), floor)
            grow = self.settings.turn_previews == "fill"
            preview = fit_preview(
                text, style, target, path=path, tool=tool, grow=grow,
                cache=self.context.internal.kept, session=session, file=file,
            )  # fmt: skip
            if preview is not None:
                plan.append((cand, path, preview))
                total -= len(text) - len(preview)
        for i, (cand, path, preview) in sorted(enumerate(plan), key=lambda p: -len(p[1][2])):
            if total <= budget:
                break
            smaller = fit_preview(
                cand.result.text,
                style,
                max(len(preview) - (total - budget), 0),
                path=path,
                tool=cand.site.tool_name,
                cache=self.context.internal.kept,
                session=session,
                file=self.files.read_of(cand.site),
            )
            if smaller is not None and len(smaller) < len(preview):
                total -= len(preview) - len(smaller)
                plan[i] = (cand, path, smaller)
        for cand, path, preview in plan:
            self._apply(cand, path, preview, "turn_budget")
        if total > budget:
            logger.info(
                "turn still over budget after spilling all it could: %d > %d", total, budget
            )

    def _spill_to(self, cand: _Candidate, target: int, reason: str) -> None:
        """Save ``cand``'s text and replace it by a preview of at most ``target``
        characters (or the shortest possible one)."""
        style, tool = self.settings.preview, cand.site.tool_name
        where = self._location(cand)
        if not could_shorten(
            cand.result.text, style, path=where, tool=tool, session=self.context.session_id
        ):
            return
        path = self._save(cand)
        if isinstance(path, OSError):
            self._spill_failed(cand, target, reason, str(path))
            return
        preview = fit_preview(
            cand.result.text,
            self.settings.preview,
            target,
            path=path,
            tool=cand.site.tool_name,
            grow=self.settings.fill_cap,
            cache=self.context.internal.kept,
            session=self.context.session_id,
            file=self.files.read_of(cand.site),
        )
        if preview is not None:
            self._apply(cand, path, preview, reason)

    def _save(self, cand: _Candidate) -> str | OSError:
        text = cand.result.text
        try:
            return self.context.spill.save(_key(cand), text, suffix=_suffix(text))
        except OSError as exc:
            return exc

    def _location(self, cand: _Candidate) -> str | None:
        """Where the store would save ``cand``'s text, if it can say without saving."""
        where = getattr(self.context.spill, "location", None)
        if not callable(where):
            return None
        text = cand.result.text
        found = where(_key(cand), text, suffix=_suffix(text))
        return found if isinstance(found, str) else None

    def _apply(self, cand: _Candidate, path: str, preview: str, reason: str) -> None:
        before = len(cand.result.text)
        self._freeze(cand, preview)
        self._record(
            ActionKind.SPILLED,
            cand.site,
            before,
            len(preview),
            reason=reason,
            cap=cand.cap.max_chars,
            cap_source=cand.cap.source,
            path=path,
        )

    def _spill_failed(self, cand: _Candidate, target: int, reason: str, error: str) -> str:
        """The policy decides: keep the result whole (default) or cut it, keeping the
        removed text in the report so nothing is lost. Returns the result's new text."""
        text = cand.result.text
        cand.frozen = True
        if self.settings.on_spill_error == "keep":
            self._record(
                ActionKind.SPILL_FAILED,
                cand.site,
                len(text),
                len(text),
                reason=reason,
                error=error,
                action="kept whole",
            )
            return text
        # The error names the store's file: escaped like a name, and never read as a field.
        notice = f"\n... [output truncated — {{omitted}} chars could not be saved: {prose(error)}]"
        keep = max(target - len(notice) - 10, 0)
        cut = text[:keep] + notice.replace("{omitted}", str(len(text) - keep), 1)
        if len(cut) >= len(text):
            return text
        self._freeze(cand, cut)
        self._record(
            ActionKind.TRUNCATED_UNSAVED,
            cand.site,
            len(text),
            len(cut),
            reason=reason,
            error=error,
            removed_text=text[keep:],
        )
        return cut

    def _freeze(self, cand: _Candidate, text: str) -> None:
        original = cand.result.original or cand.result.text
        cand.result = cand.result.with_text(text, original=original)
        cand.frozen = True
        self._replace(cand.site, cand.result)

    def _replace(self, site: ResultSite, result: ToolResult) -> None:
        self.conversation.replace_block(site.node, site.block, result)

    def _record(self, kind: str, site: ResultSite, before: int, after: int, **detail: Any) -> None:
        self.context.record(
            kind, tool_call_id=site.result.call_id, tool_name=site.tool_name,
            message_index=self.conversation.nodes[site.node].origin,
            chars_before=before, chars_after=after, **detail,
        )  # fmt: skip


def _is_json(text: str) -> bool:
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _has_text(text: str) -> bool:
    """``bool(text.strip())`` without copying a 50 MB text: ``isspace`` stops at the first
    character that is not blank."""
    return bool(text) and not text.isspace()


def _key(cand: _Candidate) -> str:
    return cand.result.call_id or cand.site.tool_name or "result"


def _suffix(text: str) -> str:
    return ".json" if _is_json(text) else ".txt"
