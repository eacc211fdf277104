"""Per-tool line rules: pi's truncation with the notices the model reads.

A tool with a line rule (``tools.<name>.lines: head|tail`` in the policy) is bounded by
lines and bytes instead of characters: ``head`` keeps the first lines (read, grep, find,
ls), ``tail`` the last ones (bash). A rule may also cap the number of items (one per line:
matches, paths, entries) and clip long lines. The full output is always in the spill
store; when no notice already names the file, a pointer line does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from middleware.policy.settings import bind
from middleware.policy.templates import fill, read_names, template_pattern
from middleware.steps.budget.line_truncation import (
    LineLimits,
    Truncation,
    byte_length,
    clip_line,
    format_size,
    truncate_head,
    truncate_tail,
)
from middleware.steps.budget.settings import BudgetSettings, tool_settings

if TYPE_CHECKING:
    from middleware.policy import Policy


@dataclass(frozen=True)
class LineRule:
    """How one tool's output is bounded (from ``tools.<name>`` in the policy)."""

    keep: Literal["head", "tail"]
    limits: LineLimits
    notices: Mapping[str, str]
    #: Cap on items (lines) before the byte and line limits, with their name in notices.
    max_items: int | None
    noun: str
    #: Clip each line to ``line_chars`` characters first (pi's grep).
    clip_lines: bool
    line_chars: int
    clip_suffix: str
    #: The call argument holding a 1-based start line (pi's read ``offset``).
    offset_argument: str | None


def line_rule(policy: Policy, tool_name: str | None) -> LineRule | None:
    """The line rule the policy sets for ``tool_name``, if any."""
    entry = tool_settings(policy, tool_name) if tool_name is not None else None
    keep = entry[1].lines if entry is not None else None
    if entry is None or keep is None:
        return None
    tool = entry[1]
    shared = bind(policy, BudgetSettings).line_limits
    return LineRule(
        keep=keep,
        limits=LineLimits(shared.max_lines, shared.max_bytes),
        notices={**shared.notices, **(tool.notices or {})},
        max_items=tool.max_items,
        noun=tool.noun,
        clip_lines=tool.clip_lines,
        line_chars=shared.line_chars,
        clip_suffix=shared.clip_suffix,
        offset_argument=tool.offset_argument,
    )


@dataclass(frozen=True)
class LineCut:
    """What a line rule keeps of one output; :meth:`render` adds the notices once the
    full text has been saved."""

    rule: LineRule
    truncation: Truncation
    #: The output after clipping and the item limit, before the line and byte limits.
    body: str
    #: Lines (items) in the output.
    count: int
    clipped: bool
    item_limited: bool

    def render(self, *, path: str, arguments: Any, tool: str) -> str:
        """The kept text and the notices, naming ``path`` where the full text is."""
        rule, truncation = self.rule, self.truncation
        args = _arguments(arguments)
        offset = _int(args.get(rule.offset_argument)) if rule.offset_argument else None
        fields = _fields(rule, truncation, offset=offset or 1)
        fields.update(count=self.count, shown=truncation.output_lines)
        source = args.get("path") or args.get("file_path") or args.get("file") or path
        names = {"path": path, "source": str(source), "tool": tool}
        if truncation.first_line_exceeds_limit or truncation.last_line_partial:
            line = self.body.split("\n")[0 if rule.keep == "head" else -1]
            fields["line_size"] = format_size(byte_length(line))
        notices = []
        if rule.max_items is not None or rule.clip_lines:
            if self.item_limited:
                notices.append(rule.notices["item_limit"])
            if truncation.truncated:
                notices.append(rule.notices["items_bytes"])
            if self.clipped:
                notices.append(rule.notices["clipped_lines"])
        else:
            notices.append(_situation(rule, truncation))
        rendered = [fill(template, fields, names) for template in notices]
        if not any("{path}" in template for template in notices):
            rendered.append(fill(rule.notices["pointer"], fields, names))
        content = truncation.content
        return (content + "\n\n" if content else "") + "\n".join(rendered)


def cut_lines(text: str, rule: LineRule) -> LineCut | None:
    """What ``rule`` keeps of ``text``, or ``None`` when it is within limits."""
    lines = text.split("\n")
    clipped = False
    if rule.clip_lines:
        cut = [clip_line(line, rule.line_chars, rule.clip_suffix) for line in lines]
        clipped = any(c for _, c in cut)
        lines = [line for line, _ in cut]
    count = len(lines)
    item_limited = rule.max_items is not None and count > rule.max_items
    if item_limited:
        lines = lines[: rule.max_items]
    body = "\n".join(lines)
    cut_by = truncate_tail if rule.keep == "tail" else truncate_head
    truncation = cut_by(body, rule.limits)
    if not (clipped or item_limited or truncation.truncated):
        return None
    return LineCut(rule, truncation, body, count, clipped, item_limited)


def looks_shaped(text: str, rule: LineRule) -> bool:
    """Whether ``text`` ends with notices this rule writes (a cheap first check)."""
    last = text.rsplit("\n\n", 1)[-1].split("\n")
    patterns = [template_pattern(t) for t in rule.notices.values()]
    return bool(last) and all(any(p.fullmatch(line) for p in patterns) for line in last)


def recover_line_cut(
    text: str, rule: LineRule, load: Callable[[str], str | None], *, arguments: Any, tool: str
) -> str | None:
    """The full output ``text`` stands for, if this rule wrote it: its notices name a file
    the spill store holds, and cutting that file's content again writes exactly ``text``.
    An output that merely ends like a notice is not recognised."""
    if not looks_shaped(text, rule):
        return None
    notices = text.rsplit("\n\n", 1)[-1].split("\n")
    for line in notices:
        for template in rule.notices.values():
            if "{path}" not in template:
                continue
            match = template_pattern(template, named=True).fullmatch(line)
            path = None if match is None else read_names(match.groupdict()).get("path")
            content = load(path) if path else None
            if content is None:
                continue
            cut = cut_lines(content, rule)
            if (
                cut is not None
                and cut.render(path=path or "", arguments=arguments, tool=tool) == text
            ):
                return content
    return None


def _situation(rule: LineRule, truncation: Truncation) -> str:
    if rule.keep == "tail":
        if truncation.last_line_partial:
            return rule.notices["tail_partial"]
        return rule.notices["tail_bytes" if truncation.truncated_by == "bytes" else "tail_lines"]
    if truncation.first_line_exceeds_limit:
        return rule.notices["first_line_too_long"]
    return rule.notices["head_bytes" if truncation.truncated_by == "bytes" else "head_lines"]


def _fields(rule: LineRule, t: Truncation, *, offset: int) -> dict[str, Any]:
    """The notices' fields other than names."""
    start = offset - 1 if rule.keep == "head" else 0
    first = t.first_line + start if not t.first_line_exceeds_limit else offset
    return {
        "first": first,
        "last": t.last_line + start,
        "total": t.total_lines + start,
        "next": t.last_line + start + 1,
        "limit": format_size(rule.limits.max_bytes),
        "max_bytes": rule.limits.max_bytes,
        "line_size": "",
        "max_items": rule.max_items or 0,
        "more_items": (rule.max_items or 0) * 2,
        "noun": rule.noun,
        "line_chars": rule.line_chars,
    }


def _arguments(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}
    return {}


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 1:
        return value
    if isinstance(value, str) and value.isdigit() and int(value) >= 1:
        return int(value)
    return None
