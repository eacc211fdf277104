"""What the budget step does to one result over its bound: bound it by its tool's line
rule, or save it whole to the session's spill store and put a preview in its place; when
the store fails, keep it or cut it as ``spill.on_error`` says. Every change goes into the
conversation and the report here, so each is recorded once and the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from middleware.plugin.admission import Cap
from middleware.plugin.context import StepContext
from middleware.policy.quoting import prose
from middleware.report import ActionKind
from middleware.steps.budget.line_rules import LineRule, cut_lines
from middleware.steps.budget.settings import BudgetSettings
from middleware.steps.file_tools import FileTools
from middleware.steps.previews import could_shorten, fit_preview
from middleware.view import Conversation, ResultSite, ToolResult


@dataclass
class Candidate:
    """A result of the turn under way, with the cap and line rule it is bounded by."""

    site: ResultSite
    result: ToolResult
    cap: Cap
    frozen: bool  # already a preview, decided earlier, or exempt: never cut again
    rule: LineRule | None = None
    incoming: str = ""  # the text the request carried, for the decision ledger


class Spilling:
    """The changes one budget pass makes to the results of ``conversation``."""

    def __init__(
        self,
        settings: BudgetSettings,
        context: StepContext,
        conversation: Conversation,
        files: FileTools,
    ) -> None:
        self.settings = settings
        self.context = context
        self.conversation = conversation
        #: What the tools do with files: a cut file read says to read the file again.
        self.files = files

    def shape(self, cand: Candidate, rule: LineRule) -> None:
        """Bound a result by its tool's line rule (pi), the full text saved first."""
        cut = cut_lines(cand.result.text, rule)
        if cut is None:
            return
        path = self.save(cand)
        if isinstance(path, OSError):
            self.spill_failed(cand, rule.limits.max_bytes, "line_rule", str(path))
            return
        arguments = cand.site.call.call.arguments if cand.site.call is not None else None
        shaped = cut.render(path=path, arguments=arguments, tool=cand.site.tool_name or "tool")
        self.apply(cand, path, shaped, "line_rule")

    def spill_to(self, cand: Candidate, target: int, reason: str) -> None:
        """Save ``cand``'s text and replace it by a preview of at most ``target``
        characters (or the shortest possible one)."""
        if not self.could_shorten(cand):
            return
        path = self.save(cand)
        if isinstance(path, OSError):
            self.spill_failed(cand, target, reason, str(path))
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
            self.apply(cand, path, preview, reason)

    def could_shorten(self, cand: Candidate) -> bool:
        """Whether a preview of ``cand`` can be shorter than its text: if not, nothing is
        saved (20,000 tiny results in one turn once meant 20,000 files nothing named)."""
        return could_shorten(
            cand.result.text,
            self.settings.preview,
            path=self.location(cand),
            tool=cand.site.tool_name,
            session=self.context.session_id,
        )

    def save(self, cand: Candidate) -> str | OSError:
        text = cand.result.text
        try:
            return self.context.spill.save(_key(cand), text, suffix=_suffix(text))
        except OSError as exc:
            return exc

    def location(self, cand: Candidate) -> str | None:
        """Where the store would save ``cand``'s text, if it can say without saving."""
        where = getattr(self.context.spill, "location", None)
        if not callable(where):
            return None
        text = cand.result.text
        found = where(_key(cand), text, suffix=_suffix(text))
        return found if isinstance(found, str) else None

    def apply(self, cand: Candidate, path: str, preview: str, reason: str) -> None:
        before = len(cand.result.text)
        self.freeze(cand, preview)
        self.record(
            ActionKind.SPILLED,
            cand.site,
            before,
            len(preview),
            reason=reason,
            cap=cand.cap.max_chars,
            cap_source=cand.cap.source,
            path=path,
        )

    def spill_failed(self, cand: Candidate, target: int, reason: str, error: str) -> str:
        """The policy decides: keep the result whole (default) or cut it, keeping the
        removed text in the report so nothing is lost. Returns the result's new text."""
        text = cand.result.text
        cand.frozen = True
        if self.settings.on_spill_error == "keep":
            self.record(
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
        self.freeze(cand, cut)
        self.record(
            ActionKind.TRUNCATED_UNSAVED,
            cand.site,
            len(text),
            len(cut),
            reason=reason,
            error=error,
            removed_text=text[keep:],
        )
        return cut

    def freeze(self, cand: Candidate, text: str) -> None:
        original = cand.result.original or cand.result.text
        cand.result = cand.result.with_text(text, original=original)
        cand.frozen = True
        self.replace(cand.site, cand.result)

    def replace(self, site: ResultSite, result: ToolResult) -> None:
        self.conversation.replace_block(site.node, site.block, result)

    def record(self, kind: str, site: ResultSite, before: int, after: int, **detail: Any) -> None:
        self.context.record(
            kind,
            tool_call_id=site.result.call_id,
            tool_name=site.tool_name,
            message_index=self.conversation.nodes[site.node].origin,
            chars_before=before,
            chars_after=after,
            **detail,
        )


def _is_json(text: str) -> bool:
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _key(cand: Candidate) -> str:
    return cand.result.call_id or cand.site.tool_name or "result"


def _suffix(text: str) -> str:
    return ".json" if _is_json(text) else ".txt"
