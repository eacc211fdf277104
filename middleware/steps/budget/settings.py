"""The budget step's settings, bound from a policy snapshot, and how a result's cap is chosen."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from middleware.plugin.admission import Cap
from middleware.plugin.context import declared_cap
from middleware.policy.settings import bind_entry, converted, group, section, setting
from middleware.steps.previews import PreviewStyle
from middleware.steps.tool_names import names_match

if TYPE_CHECKING:
    from middleware.plugin.context import StepContext
    from middleware.policy import Policy


@dataclass(frozen=True)
class ContextAware:
    """Hermes' ceiling: max(floor, min(baseline, available context)), in characters."""

    enabled: bool
    window_tokens: int
    chars_per_token: float
    result_fraction: float
    turn_fraction: float
    floor_tokens: int
    #: When the context is tight, summarise old results (older than ``protect_turns``)
    #: before lowering a result's cap, so the model gets a useful chunk (Hermes).
    compact_before_spill: bool
    protect_turns: int

    def tight(self, used_chars: int) -> bool:
        """Whether the context left is below the per-result baseline."""
        total = self.window_tokens * self.chars_per_token
        return total - used_chars < total * self.result_fraction

    def ceiling(self, fraction: float, used_chars: int) -> int:
        baseline = self.window_tokens * self.chars_per_token * fraction
        available = max(self.window_tokens * self.chars_per_token - used_chars, 0)
        floor = self.floor_tokens * self.chars_per_token
        return int(max(floor, min(baseline, available)))


@dataclass(frozen=True)
class ReportSettings:
    """``budget.reports``: the floor of a subagent's report."""

    #: Characters a report keeps at least; ``None``: no floor.
    min_chars: int | None
    #: Tools (names or glob patterns) whose results are reports.
    tools: tuple[str, ...] = converted(tuple)

    def floor(self, tool_name: str | None) -> int | None:
        if self.min_chars is None or tool_name is None:
            return None
        return self.min_chars if names_match(self.tools, tool_name) else None


@dataclass(frozen=True)
class LineLimitSettings:
    """pi's limits and notices for tools with a line rule (``budget.line_limits``)."""

    max_lines: int
    max_bytes: int
    line_chars: int
    clip_suffix: str
    notices: Mapping[str, str]


@section("budget")
@dataclass(frozen=True)
class BudgetSettings:
    enabled: bool
    max_result_chars: int
    #: A result over its cap is cut only when the cut takes off this share of it.
    min_saving: float
    per_tool_default_chars: int
    declared_cap_ceiling: int | None
    turn_budget_chars: int | None
    turn_strategy: Literal["largest_first", "even_split"]
    turn_previews: Literal["fill", "standard"]
    empty_result_text: str | None
    preview: PreviewStyle = group(PreviewStyle, "budget.preview")
    #: Grow a spilled result's preview to fill its cap (Ethos keeps the first ``cap``
    #: characters), instead of the standard head and tail sizes.
    fill_cap: bool = setting("budget.preview.fill")
    #: Replay the decision made for a call id on every later request (Claude Code).
    freeze_decisions: bool = setting("budget.freeze_decisions")
    context_aware: ContextAware = group(ContextAware, "budget.context_aware")
    line_limits: LineLimitSettings = group(LineLimitSettings, "budget.line_limits")
    reports: ReportSettings = group(ReportSettings, "budget.reports")
    on_spill_error: Literal["keep", "truncate"] = setting("spill.on_error")

    @property
    def aware(self) -> ContextAware | None:
        """The context-aware ceiling, when the policy turns it on."""
        return self.context_aware if self.context_aware.enabled else None


@section("tools.*")
@dataclass(frozen=True)
class ToolSettings:
    """One entry of the policy's ``tools`` section (unset keys read the schema defaults)."""

    max_chars: int | None
    exempt: bool
    lines: Literal["head", "tail"] | None
    max_items: int | None
    noun: str
    clip_lines: bool
    offset_argument: str | None
    notices: Mapping[str, str] | None


def tool_settings(policy: Policy, tool_name: str) -> tuple[str, ToolSettings] | None:
    """The settings the policy gives ``tool_name`` and the ``tools`` key they come from
    (the tool's own name, or the glob pattern that matched it)."""
    entry = policy.tool_entry(tool_name)
    if entry is None:
        return None
    key, values = entry
    return key, bind_entry(ToolSettings, values, "tools.*")


@dataclass(frozen=True)
class TurnLimits:
    """The limits one turn's results share: its aggregate budget (``None``: no limit),
    the context-aware ceiling of one result, and the even share of one call."""

    budget: int | None
    ceiling: int | None
    share: int | None
    calls: int

    @classmethod
    def of(cls, settings: BudgetSettings, calls: int, used_chars: int | None) -> TurnLimits:
        """The limits of a turn of ``calls`` results after ``used_chars`` of history
        (``None``: not known, the context-aware ceilings are not applied)."""
        budget = settings.turn_budget_chars
        ceiling = None
        aware = settings.aware
        if aware is not None and used_chars is not None:
            aware_budget = aware.ceiling(aware.turn_fraction, used_chars)
            budget = aware_budget if budget is None else min(budget, aware_budget)
            ceiling = aware.ceiling(aware.result_fraction, used_chars)
        share = None
        if settings.turn_strategy == "even_split" and budget is not None:
            share = budget // max(calls, 1)
        return cls(budget, ceiling, share, calls)

    def cap_for(self, cap: Cap) -> Cap:
        """``cap`` lowered by the context-aware ceiling and the even share."""
        if cap.max_chars is not None and self.ceiling is not None and self.ceiling < cap.max_chars:
            cap = Cap(self.ceiling, f"{cap.source}, lowered by budget.context_aware")
        if cap.max_chars is not None and self.share is not None and self.share < cap.max_chars:
            cap = Cap(self.share, f"budget.turn_budget_chars / {self.calls} calls (even_split)")
        return cap


#: Where the cap of a result comes from when nothing names its tool.
GENERIC_CAP = "budget.max_result_chars"


def resolve_cap(tool_name: str | None, settings: BudgetSettings, context: StepContext) -> Cap:
    """Policy override for the tool, else the tool plugin's declaration, else the
    per-result cap (raised to the floor of a subagent's report)."""
    if tool_name is not None:
        entry = tool_settings(context.policy, tool_name)
        if entry is not None:
            key, override = entry
            where = f"policy {context.policy.source}: tools.{key}"
            if override.exempt:
                return Cap(None, f"{where}.exempt")
            if override.max_chars is not None:
                return Cap(override.max_chars, f"{where}.max_chars")
        declared = declared_cap(context, tool_name)
        if declared is not None:
            where = f"plugin {declared.plugin}"
            if declared.cap.exempt:
                return Cap(None, f"{where} (exempt)")
            if declared.cap.max_chars is None:
                return Cap(settings.per_tool_default_chars, f"{where} (per-tool default)")
            ceiling = settings.declared_cap_ceiling
            if ceiling is not None and declared.cap.max_chars > ceiling:
                return Cap(ceiling, f"{where}, clamped by budget.declared_cap_ceiling")
            return Cap(declared.cap.max_chars, where)
    floor = settings.reports.floor(tool_name)
    if floor is not None and floor > settings.max_result_chars:
        return Cap(floor, "budget.reports.min_chars")
    return Cap(settings.max_result_chars, GENERIC_CAP)
