"""The microcompaction step's settings, bound from a policy snapshot, and its texts."""

from __future__ import annotations

import string
from dataclasses import dataclass

from middleware.policy.settings import converted, group, section, setting
from middleware.steps.previews import PreviewStyle, make_preview, parse_preview


@section("microcompact")
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
    exempt_tools: frozenset[str] = converted(frozenset)
    step_turns: int = setting("microcompact.schedule.step_turns")
    trigger_tokens: int = setting("microcompact.schedule.trigger_tokens")
    min_reclaim_tokens: int = setting("microcompact.schedule.min_reclaim_tokens")
    min_reclaim_ratio: float = setting("microcompact.schedule.min_reclaim_ratio")
    rewrite_cost: float = setting("microcompact.schedule.rewrite_cost")
    expected_turns_factor: float = setting("microcompact.schedule.expected_turns_factor")
    expected_turns_min: int = setting("microcompact.schedule.expected_turns_min")
    window_tokens: int | None = setting("microcompact.schedule.window_tokens")
    chars_per_token: float = setting("microcompact.schedule.chars_per_token")
    #: The budget step's preview style, to recognise its previews.
    budget_preview: PreviewStyle = group(PreviewStyle, "budget.preview")

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
        return PreviewStyle(
            head=self.head_chars,
            tail=self.tail_chars,
            unit="chars",
            template=self.truncate_template,
            line_breaks=True,
        )


def _longest_literal(template: str) -> str:
    literals = [literal for literal, _, _, _ in string.Formatter().parse(template)]
    return max(literals, key=len, default="")
