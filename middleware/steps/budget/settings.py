"""The budget step's settings, read from a policy snapshot, and how a result's cap is chosen."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from middleware.steps.budget.line_rules import LINE_DEFAULTS
from middleware.steps.previews import DEFAULT_TEMPLATE, PreviewStyle

if TYPE_CHECKING:
    from middleware.plugin.context import StepContext
    from middleware.policy import Policy

#: The defaults of the ``budget`` section (ChatCLI's numbers); ``policies/default.yaml``
#: states the same values and a test keeps the two in step.
BUDGET_DEFAULTS: dict[str, Any] = {
    "enabled": True,
    "max_result_chars": 20_000,
    "per_tool_default_chars": 30_000,
    "declared_cap_ceiling": None,
    "turn_budget_chars": 200_000,
    "turn_strategy": "largest_first",
    "turn_previews": "fill",
    "freeze_decisions": False,
    "empty_result_text": "({tool} completed with no output)",
    "preview": {
        "head": 4000,
        "tail": 1000,
        "unit": "chars",
        "line_breaks": True,
        "template": DEFAULT_TEMPLATE,
        "fill": False,
    },
    "context_aware": {
        "enabled": False,
        "window_tokens": 200_000,
        "chars_per_token": 4,
        "result_fraction": 0.25,
        "turn_fraction": 0.5,
        "floor_tokens": 2000,
        "compact_before_spill": False,
        "protect_turns": 2,
    },
    "line_limits": LINE_DEFAULTS,
}
SPILL_DEFAULTS: dict[str, Any] = {"root": None, "keep": False, "on_error": "keep"}


@dataclass(frozen=True)
class ContextAware:
    """Hermes' ceiling: max(floor, min(baseline, available context)), in characters."""

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
class BudgetSettings:
    enabled: bool
    max_result_chars: int
    per_tool_default_chars: int
    declared_cap_ceiling: int | None
    turn_budget_chars: int | None
    turn_strategy: Literal["largest_first", "even_split"]
    turn_previews: Literal["fill", "standard"]
    empty_result_text: str | None
    preview: PreviewStyle
    #: Grow a spilled result's preview to fill its cap (Ethos keeps the first ``cap``
    #: characters), instead of the standard head and tail sizes.
    fill_cap: bool
    #: Replay the decision made for a call id on every later request (Claude Code).
    freeze_decisions: bool
    context_aware: ContextAware | None
    on_spill_error: Literal["keep", "truncate"]

    @classmethod
    def from_policy(cls, policy: Policy) -> BudgetSettings:
        def get(key: str) -> Any:
            section, _, rest = key.partition(".")
            defaults = BUDGET_DEFAULTS if section == "budget" else SPILL_DEFAULTS
            return policy.setting(section, rest, defaults)

        aware = None
        if get("budget.context_aware.enabled"):
            aware = ContextAware(
                window_tokens=get("budget.context_aware.window_tokens"),
                chars_per_token=get("budget.context_aware.chars_per_token"),
                result_fraction=get("budget.context_aware.result_fraction"),
                turn_fraction=get("budget.context_aware.turn_fraction"),
                floor_tokens=get("budget.context_aware.floor_tokens"),
                compact_before_spill=get("budget.context_aware.compact_before_spill"),
                protect_turns=get("budget.context_aware.protect_turns"),
            )
        return cls(
            enabled=get("budget.enabled"),
            max_result_chars=get("budget.max_result_chars"),
            per_tool_default_chars=get("budget.per_tool_default_chars"),
            declared_cap_ceiling=get("budget.declared_cap_ceiling"),
            turn_budget_chars=get("budget.turn_budget_chars"),
            turn_strategy=get("budget.turn_strategy"),
            turn_previews=get("budget.turn_previews"),
            empty_result_text=get("budget.empty_result_text"),
            preview=PreviewStyle(
                head=get("budget.preview.head"),
                tail=get("budget.preview.tail"),
                unit=get("budget.preview.unit"),
                line_breaks=get("budget.preview.line_breaks"),
                template=get("budget.preview.template"),
            ),
            fill_cap=get("budget.preview.fill"),
            freeze_decisions=get("budget.freeze_decisions"),
            context_aware=aware,
            on_spill_error=get("spill.on_error"),
        )


@dataclass(frozen=True)
class Cap:
    """The cap that applies to one result (``None``: exempt) and where it came from."""

    max_chars: int | None
    source: str


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
        aware = settings.context_aware
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


def resolve_cap(tool_name: str | None, settings: BudgetSettings, context: StepContext) -> Cap:
    """Policy override for the tool, else the tool plugin's declaration, else the
    per-result cap."""
    if tool_name is not None:
        entry = context.policy.tool_settings(tool_name)
        if entry is not None:
            key, override = entry
            where = f"policy {context.policy.source}: tools.{key}"
            if override.get("exempt", False):
                return Cap(None, f"{where}.exempt")
            if override.get("max_chars") is not None:
                return Cap(int(override["max_chars"]), f"{where}.max_chars")
        declared = context.tool_cap(tool_name)
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
    return Cap(settings.max_result_chars, "budget.max_result_chars")
