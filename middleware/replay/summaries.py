"""What a simulation reports: per policy over every transcript (:class:`PolicySummary`),
per session (:class:`SessionFigures`) and per request, for plots (:class:`SessionSeries`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SessionSeries:
    """Per-request figures of one transcript under one policy (for plots)."""

    tokens: list[int] = field(default_factory=list)
    #: Cumulative cost, and cumulative effective cost: each read-back charged at the
    #: request where the hidden result was first missed.
    costs: list[float] = field(default_factory=list)
    effective: list[float] = field(default_factory=list)
    #: Whether the transcript recorded times, and whether they priced the cache's expiry
    #: (not with ``clock=False``): without, the cache never expired.
    timestamps: bool = False
    clock: bool = False


@dataclass
class SessionFigures:
    """One session under one policy."""

    cost: float = 0.0
    raw_cost: float = 0.0
    readback_cost: float = 0.0
    references: int = 0
    hidden: int = 0
    quotes: int = 0
    quotes_hidden: int = 0
    #: Hidden quotes by what hid their result and by the tool that gave the text.
    quotes_hidden_by: dict[str, dict[str, int]] = field(default_factory=dict)
    rereads: int = 0

    def to_dict(self) -> dict[str, Any]:
        raw = self.raw_cost or 1.0
        return {
            "relative_cost": round(self.cost / raw, 4),
            "relative_effective_cost": round((self.cost + self.readback_cost) / raw, 4),
            "references": self.references,
            "hidden": self.hidden,
            "quotes": self.quotes,
            "quotes_hidden": self.quotes_hidden,
            "quotes_hidden_by": sorted_by_cause(self.quotes_hidden_by),
            "forced_rereads": self.rereads,
        }


def sorted_by_cause(by: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """A cause -> tool -> count table with both levels in name order (stable JSON)."""
    return {cause: dict(sorted(tools.items())) for cause, tools in sorted(by.items())}


@dataclass
class PolicySummary:
    """What one policy did over all transcripts."""

    name: str
    requests: int = 0
    tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0
    raw_cost: float = 0.0
    peak_tokens: int = 0
    over_window: int = 0
    #: Characters the budget step removed from the last request of each session (saved in
    #: the spill store), what compaction removed, and what the steps added (the text of an
    #: empty result, notices): counted apart, so none of them hides another.
    chars_spilled: int = 0
    chars_compacted: int = 0
    chars_added: int = 0
    #: Requests in which microcompaction changed a result of the last two assistant turns
    #: (it never should), and in which the budget step spilled one (by design).
    recent_compacted: int = 0
    recent_spilled: int = 0
    references: int = 0
    hidden: int = 0
    #: Requests that found the cache expired (sent longer than its lifetime after the
    #: previous one, by the transcript's clock).
    expired: int = 0
    #: What reading hidden outputs back would cost
    #: (:func:`~middleware.replay.costs.readback_cost`), the same unit
    #: as ``cost``.
    readback_cost: float = 0.0
    #: Hidden references by the action that hid their result (``step:kind``).
    hidden_by: dict[str, int] = field(default_factory=dict)
    #: The independent measure (:mod:`.quotes`): lines the model's tool inputs quote from
    #: earlier results, those the policy removed (also by the action that hid their result
    #: and the tool that gave the text, as ``hidden_by`` for references), and the edits
    #: that quote a removed line (forced re-reads), by the tool whose result it was taken
    #: from.
    quotes: int = 0
    quotes_hidden: int = 0
    quotes_hidden_by: dict[str, dict[str, int]] = field(default_factory=dict)
    rereads: dict[str, int] = field(default_factory=dict)
    #: Per session: cost, raw cost, read-back cost, references, hidden.
    sessions: dict[str, SessionFigures] = field(default_factory=dict)
    series: dict[str, SessionSeries] = field(default_factory=dict)

    @property
    def relative_cost(self) -> float:
        return self.cost / self.raw_cost if self.raw_cost else 1.0

    @property
    def relative_effective_cost(self) -> float:
        """Cost plus read-back cost, relative to no middleware."""
        return (self.cost + self.readback_cost) / self.raw_cost if self.raw_cost else 1.0

    @property
    def cache_hit_ratio(self) -> float:
        return self.cached_tokens / self.tokens if self.tokens else 0.0

    @property
    def hidden_rate(self) -> float:
        return self.hidden / self.references if self.references else 0.0

    @property
    def quotes_hidden_rate(self) -> float:
        return self.quotes_hidden / self.quotes if self.quotes else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.name,
            "requests": self.requests,
            "relative_cost": round(self.relative_cost, 4),
            "cost": round(self.cost, 1),
            "raw_cost": round(self.raw_cost, 1),
            "cache_hit_ratio": round(self.cache_hit_ratio, 4),
            "requests_after_expiry": self.expired,
            "peak_request_tokens": self.peak_tokens,
            "requests_over_window": self.over_window,
            "chars_spilled": self.chars_spilled,
            "chars_compacted": self.chars_compacted,
            "chars_added": self.chars_added,
            "recent_results_uncompacted": self.recent_compacted == 0,
            "requests_with_recent_results_compacted": self.recent_compacted,
            "requests_with_recent_results_spilled": self.recent_spilled,
            "references": self.references,
            "hidden_references": self.hidden,
            "hidden_rate": round(self.hidden_rate, 4),
            "readback_cost": round(self.readback_cost, 1),
            "relative_effective_cost": round(self.relative_effective_cost, 4),
            "hidden_by": dict(sorted(self.hidden_by.items())),
            "quotes": self.quotes,
            "quotes_hidden": self.quotes_hidden,
            "quotes_hidden_rate": round(self.quotes_hidden_rate, 4),
            "quotes_hidden_by": sorted_by_cause(self.quotes_hidden_by),
            "forced_rereads": sum(self.rereads.values()),
            "forced_rereads_by_tool": dict(sorted(self.rereads.items())),
            "sessions": {name: figures.to_dict() for name, figures in self.sessions.items()},
        }
