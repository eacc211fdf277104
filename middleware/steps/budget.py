"""Step 2, budget enforcement: per-tool, per-result and per-turn caps.

A result over its cap is saved whole to the session's spill store and replaced by a
preview that says where the full text is. Decisions depend only on the result, its turn
and the policy, so the same history always gives the same bytes (prompt-cache stability),
and a preview is recognised as one, so processing the output again changes nothing.
"""

from __future__ import annotations

import json
import logging
import string
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

from ..budget_settings import BudgetSettings, Cap, resolve_cap
from ..markers import hookimpl
from ..preview import PreviewStyle, make_preview
from ..view import Conversation, ResultSite, ToolResult
from .context import StepContext

logger = logging.getLogger(__name__)


@dataclass
class _Candidate:
    site: ResultSite
    result: ToolResult
    cap: Cap
    frozen: bool  # already a preview, or exempt: never cut again


@hookimpl(tryfirst=True)
def enforce_budget(conversation: Conversation, context: StepContext) -> None:
    settings = BudgetSettings.from_policy(context.policy)
    if settings.enabled:
        _BudgetRun(settings, context, conversation).run()


class _BudgetRun:
    """One budget pass over one conversation."""

    def __init__(
        self, settings: BudgetSettings, context: StepContext, conversation: Conversation
    ) -> None:
        self.settings = settings
        self.context = context
        self.conversation = conversation

    def run(self) -> None:
        index = self.conversation.index()
        by_turn: dict[int | None, list[ResultSite]] = defaultdict(list)
        for site in index.results:
            by_turn[site.turn].append(site)
        aware = self.settings.context_aware
        used = _chars_before_turns(self.conversation, index.node_turns) if aware else {}
        for turn, sites in by_turn.items():
            budget = self.settings.turn_budget_chars
            ceiling = None
            if aware is not None and turn is not None:
                budget = min(budget, aware.ceiling(aware.turn_fraction, used.get(turn, 0)))
                ceiling = aware.ceiling(aware.result_fraction, used.get(turn, 0))
            share = budget // len(sites) if self.settings.turn_strategy == "even_split" else None
            candidates = [self._candidate(site, ceiling, share, len(sites)) for site in sites]
            for cand in candidates:
                limit = cand.cap.max_chars
                if not cand.frozen and limit is not None and len(cand.result.text) > limit:
                    self._spill_to(cand, limit, "result_cap")
            if self.settings.turn_strategy == "largest_first":
                self._fit_turn(candidates, budget)

    def _candidate(
        self, site: ResultSite, ceiling: int | None, share: int | None, turn_size: int
    ) -> _Candidate:
        result = self._replace_empty(site)
        cap = resolve_cap(site.tool_name, self.settings, self.context)
        if cap.max_chars is not None and ceiling is not None and ceiling < cap.max_chars:
            cap = Cap(ceiling, f"{cap.source}, lowered by budget.context_aware")
        if cap.max_chars is not None and share is not None and share < cap.max_chars:
            cap = Cap(share, f"budget.turn_budget_chars / {turn_size} results (even_split)")
        frozen = cap.max_chars is None or looks_like_preview(result.text, self.settings.preview)
        return _Candidate(site, result, cap, frozen)

    def _replace_empty(self, site: ResultSite) -> ToolResult:
        result = site.result
        template = self.settings.empty_result_text
        if template is None or result.text_protocol or result.text.strip() or result.has_non_text:
            return result
        text = template.format(tool=site.tool_name or "tool")
        self._replace(site, result.with_text(text))
        self._record("empty_replaced", site, len(result.text), len(text))
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
        style = self.settings.preview
        plan: list[tuple[_Candidate, str, str]] = []  # candidate, path, preview
        for cand in sorted(
            (c for c in candidates if not c.frozen),
            key=lambda c: (-len(c.result.text), c.site.node, c.site.block),
        ):
            if total <= budget:
                break
            text, tool = cand.result.text, cand.site.tool_name
            path = self._save(cand)
            if isinstance(path, OSError):
                total -= len(text) - len(
                    self._spill_failed(cand, len(text) - (total - budget), "turn_budget", str(path))
                )
                continue
            standard = make_preview(text, style, path=path, tool=tool)
            floor = len(standard) if standard is not None else 0
            target = max(len(text) - (total - budget), floor)
            grow = self.settings.turn_previews == "fill"
            preview = fit_preview(text, style, target, path=path, tool=tool, grow=grow)
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
        path = self._save(cand)
        if isinstance(path, OSError):
            self._spill_failed(cand, target, reason, str(path))
            return
        preview = fit_preview(
            cand.result.text, self.settings.preview, target, path=path, tool=cand.site.tool_name
        )
        if preview is not None:
            self._apply(cand, path, preview, reason)

    def _save(self, cand: _Candidate) -> str | OSError:
        text = cand.result.text
        key = cand.result.call_id or cand.site.tool_name or "result"
        try:
            return self.context.spill.save(key, text, suffix=".json" if _is_json(text) else ".txt")
        except OSError as exc:
            return exc

    def _apply(self, cand: _Candidate, path: str, preview: str, reason: str) -> None:
        before = len(cand.result.text)
        self._freeze(cand, preview)
        self._record(
            "spilled",
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
                "spill_failed",
                cand.site,
                len(text),
                len(text),
                reason=reason,
                error=error,
                action="kept whole",
            )
            return text
        notice = f"\n... [output truncated — {{omitted}} chars could not be saved: {error}]"
        keep = max(target - len(notice) - 10, 0)
        cut = text[:keep] + notice.format(omitted=len(text) - keep)
        if len(cut) >= len(text):
            return text
        self._freeze(cand, cut)
        self._record(
            "truncated_unsaved",
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
        cand.result = replace(cand.result.with_text(text), original=original)
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


def fit_preview(
    text: str,
    style: PreviewStyle,
    target: int,
    *,
    path: str,
    tool: str | None,
    grow: bool = False,
) -> str | None:
    """The preview of ``text`` in ``style`` if it fits in ``target`` characters (with
    ``grow``, head and tail enlarged in proportion to fill ``target``); else one shrunk to
    fit; else the bare marker. ``None`` when no preview is shorter than the text."""
    preview = make_preview(text, style, path=path, tool=tool)
    if preview is not None and len(preview) <= target and not grow:
        return preview
    bare = make_preview(text, replace(style, head=0, tail=0), path=path, tool=tool)
    if bare is None:
        return None
    room = target - len(bare)
    if room <= 0:
        return bare
    if style.unit == "bytes":
        room //= 4  # a character takes at most 4 bytes: stay within target characters
    total = style.head + style.tail
    head = room * style.head // total if total else 0
    scaled = make_preview(text, replace(style, head=head, tail=room - head), path=path, tool=tool)
    for candidate in (scaled, preview):
        if candidate is not None and len(candidate) <= target:
            return candidate
    return bare


def looks_like_preview(text: str, style: PreviewStyle) -> bool:
    """Whether ``text`` is a preview this style produced (its longest fixed piece of the
    template is in it), so it is never cut again."""
    marker = _template_marker(style.template)
    return bool(marker) and marker in text


def _template_marker(template: str) -> str:
    literals = [lit for lit, _, _, _ in string.Formatter().parse(template)]
    longest = max(literals, key=len, default="")
    return longest if len(longest.strip()) >= 8 else ""


def _is_json(text: str) -> bool:
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _chars_before_turns(conversation: Conversation, node_turns: tuple[int, ...]) -> dict[int, int]:
    """Characters of history before each assistant turn's first node (for the
    context-aware ceiling: it depends only on what came before, so it never changes as the
    conversation grows)."""
    before: dict[int, int] = {}
    running = 0
    for node, turn in zip(conversation.nodes, node_turns, strict=True):
        if turn >= 0 and turn not in before:
            before[turn] = running
        running += (
            _node_chars(node.raw)
            if node.raw is not None
            else sum(len(b.text) for b in node.results)
        )
    return before


def _node_chars(value: object) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_node_chars(v) for v in value.values())
    if isinstance(value, list):
        return sum(_node_chars(v) for v in value)
    return 0
