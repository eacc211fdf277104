"""The microcompaction step's settings, read from a policy snapshot, and its texts."""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from middleware.steps.budget.settings import BudgetSettings
from middleware.steps.previews import PreviewStyle, make_preview, parse_preview

if TYPE_CHECKING:
    from middleware.policy import Policy

#: The defaults of the ``microcompact`` section; ``policies/default.yaml`` states the same
#: values and a test keeps the two in step.
MICROCOMPACT_DEFAULTS: dict[str, Any] = {
    "enabled": True,
    "truncate_turns": 2,
    "summarize_turns": 2,
    "head_chars": 2000,
    "tail_chars": 500,
    "min_content": 500,
    "truncate_template": (
        "{head}\n[... {omitted} chars omitted from old tool result; full output: {path}]\n{tail}"
    ),
    "summary_template": (
        "[Old tool result cleared — {lines} lines, {chars} chars, {type}. "
        "Full output: {path}]{mentions}{errors}"
    ),
    "mentions": 30,
    "error_lines": 3,
    "keep_errors": True,
    "keep_results": 0,
    "exempt_tools": [
        "write", "edit", "patch", "execute", "exec",
        "Write", "Edit", "MultiEdit", "NotebookEdit",
    ],
    "schedule": {
        "step_turns": 1,
        "trigger_tokens": 0,
        "min_reclaim_tokens": 0,
        "min_reclaim_ratio": 0.0,
        "rewrite_cost": 11.5,
        "expected_turns_factor": 1.0,
        "expected_turns_min": 10,
        "window_tokens": None,
        "chars_per_token": 4,
    },
}  # fmt: skip


@dataclass(frozen=True)
class MicrocompactSettings:
    enabled: bool
    truncate_turns: int
    summarize_turns: int
    head_chars: int
    tail_chars: int
    min_content: int
    truncate_template: str
    summary_template: str
    mentions: int
    error_lines: int
    keep_errors: bool
    keep_results: int
    exempt_tools: frozenset[str]
    step_turns: int
    trigger_tokens: int
    min_reclaim_tokens: int
    min_reclaim_ratio: float
    rewrite_cost: float
    expected_turns_factor: float
    expected_turns_min: int
    window_tokens: int | None
    chars_per_token: float
    #: The budget step's preview style, to recognise its previews.
    budget_preview: PreviewStyle

    @classmethod
    def from_policy(cls, policy: Policy) -> MicrocompactSettings:
        def get(key: str) -> Any:
            return policy.setting("microcompact", key, MICROCOMPACT_DEFAULTS)

        return cls(
            enabled=get("enabled"),
            truncate_turns=get("truncate_turns"),
            summarize_turns=get("summarize_turns"),
            head_chars=get("head_chars"),
            tail_chars=get("tail_chars"),
            min_content=get("min_content"),
            truncate_template=get("truncate_template"),
            summary_template=get("summary_template"),
            mentions=get("mentions"),
            error_lines=get("error_lines"),
            keep_errors=get("keep_errors"),
            keep_results=get("keep_results"),
            exempt_tools=frozenset(get("exempt_tools")),
            step_turns=max(get("schedule.step_turns"), 1),
            trigger_tokens=get("schedule.trigger_tokens"),
            min_reclaim_tokens=get("schedule.min_reclaim_tokens"),
            min_reclaim_ratio=get("schedule.min_reclaim_ratio"),
            rewrite_cost=get("schedule.rewrite_cost"),
            expected_turns_factor=get("schedule.expected_turns_factor"),
            expected_turns_min=get("schedule.expected_turns_min"),
            window_tokens=get("schedule.window_tokens"),
            chars_per_token=get("schedule.chars_per_token"),
            budget_preview=BudgetSettings.from_policy(policy).preview,
        )

    @property
    def truncate_marker_literal(self) -> str:
        return _longest_literal(self.truncate_template)

    @property
    def summary_marker(self) -> str:
        return _longest_literal(self.summary_template)

    def truncate(self, text: str, path: str) -> str | None:
        """Head + marker + tail, the marker giving the exact count left out and the file."""
        return make_preview(text, self._truncate_style, path=path)

    def summarize(
        self, text: str, path: str, content_type: str, mentions: list[str], errors: list[str]
    ) -> str:
        """One line naming what was cleared and where it is, then what the model is
        likely to need from it: the paths and identifiers it mentions, its error lines."""
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        return self.summary_template.format_map({
            "lines": lines,
            "chars": len(text),
            "type": content_type,
            "path": path,
            "mentions": f"\nMentions: {', '.join(mentions)}" if mentions else "",
            "errors": "".join(f"\nError line: {line}" for line in errors),
        })  # fmt: skip

    def pointer(self, text: str) -> str | None:
        """The spill file a budget preview or a truncation names, if ``text`` is one."""
        for style in (self.budget_preview, self._truncate_style):
            fields = parse_preview(text, style)
            if fields is not None and fields.get("path"):
                return fields["path"]
        return None

    def original_size(self, text: str) -> int:
        """The size ``text`` had before the budget step's preview or this step's truncation
        (both say exactly how much they left out), so eligibility is judged on the
        original and a truncated result is still summarised later."""
        for style in (self.budget_preview, self._truncate_style):
            fields = parse_preview(text, style)
            if fields is None:
                continue
            if "total" in fields:
                return int(fields["total"])
            if "omitted" in fields:
                kept = len(fields.get("head", "")) + len(fields.get("tail", ""))
                return kept + int(fields["omitted"])
        return len(text)

    @property
    def _truncate_style(self) -> PreviewStyle:
        return PreviewStyle(head=self.head_chars, tail=self.tail_chars,
                            template=self.truncate_template)  # fmt: skip


def _longest_literal(template: str) -> str:
    literals = [literal for literal, _, _, _ in string.Formatter().parse(template)]
    return max(literals, key=len, default="")
