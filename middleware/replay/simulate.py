"""Replay recorded sessions under policies and charge them with the cost model."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from middleware.formats import get_codec
from middleware.formats.text_protocol import text_protocol_rule
from middleware.pipeline import Pipeline
from middleware.plugin.host import PluginHost
from middleware.policy import Policy, load_policy
from middleware.replay import quotes as quoted
from middleware.replay.costs import (
    Pricing,
    RequestCost,
    Serializer,
    TokenCounter,
    approximate_tokens,
    request_costs,
)
from middleware.replay.references import ReferenceIndex, answer_tokens, build_index, is_hidden
from middleware.replay.transcripts import Transcript
from middleware.report import Action, Step
from middleware.view import Conversation

#: Name of the baseline: the requests exactly as recorded.
RAW = "none"


#: A cache lifetime no recorded gap reaches (a century).
FOREVER = 100 * 365 * 86_400.0


@dataclass(frozen=True)
class PolicySpec:
    """A policy to simulate: a display name and a policy file (``None``: the default)."""

    name: str
    path: str | Path | None


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


def readback_cost(pricing: Pricing, request_tokens: int, result_tokens: int) -> float:
    """What reading a hidden result back costs: one more request whose prefix (the request
    as sent) comes from the cache, plus the result's full text written again."""
    return pricing.read * request_tokens + pricing.write * result_tokens


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
    #: What reading hidden outputs back would cost (:func:`readback_cost`), the same unit
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


def simulate(
    transcripts: Sequence[Transcript],
    policies: Sequence[PolicySpec],
    pricing: Pricing,
    *,
    window: int | None = None,
    count_tokens: TokenCounter = approximate_tokens,
    progress: Callable[[int], None] | None = None,
    readback_factor: float = 1.0,
    clock: bool = True,
) -> list[PolicySummary]:
    """Replay every transcript under the raw baseline and each policy; the first summary
    is the baseline. ``progress`` is called with the number of requests just replayed.
    With ``clock``, a transcript's recorded times price the cache's expiry
    (:func:`~middleware.replay.costs.request_costs`); without, it never expires.

    A hidden reference is charged what reading its result back costs
    (:func:`readback_cost`, times ``readback_factor``), once per result and session: the
    model that read it back has it again."""
    with tempfile.TemporaryDirectory(prefix="chatcli-simulate-") as spill_root:
        run = _Simulation(policies, pricing=pricing, window=window, count_tokens=count_tokens,
                          spill_root=spill_root, progress=progress,
                          readback_factor=readback_factor, clock=clock)  # fmt: skip
        for transcript in transcripts:
            run.replay(transcript)
    return run.summaries


class _Simulation:
    def __init__(
        self,
        policies: Sequence[PolicySpec],
        *,
        pricing: Pricing,
        window: int | None,
        count_tokens: TokenCounter,
        spill_root: str,
        progress: Callable[[int], None] | None,
        readback_factor: float = 1.0,
        clock: bool = True,
    ) -> None:
        self.readback_factor = readback_factor
        self.clock = clock
        self.policies = policies
        self.pricing = pricing
        self.window = window
        self.count_tokens = count_tokens
        self.spill_root = spill_root
        self.progress = progress
        self.summaries = [PolicySummary(RAW), *(PolicySummary(p.name) for p in policies)]
        #: One plugin host for every session's pipelines, as the proxy has, and each policy
        #: loaded once per set of overrides: loading them for every session was most of
        #: what a replay of many short sessions cost.
        self._host = PluginHost.create()
        self._loaded: dict[tuple[str | None, str], Policy] = {}

    def _policy(self, path: str | Path | None, overrides: dict[str, Any]) -> Policy:
        key = (
            None if path is None else str(path),
            json.dumps(overrides, sort_keys=True, default=repr),
        )
        if key not in self._loaded:
            self._loaded[key] = load_policy(path, env={}, dotenv_path=False, overrides=overrides)
        return self._loaded[key]

    @property
    def _lifetime(self) -> float:
        """The cache lifetime the pipelines are told: the pricing's (``None``: it lives
        for ever, where a policy's null would say there is no cache)."""
        return self.pricing.lifetime if self.pricing.lifetime is not None else FOREVER

    def replay(self, transcript: Transcript) -> None:
        requests = list(transcript.requests())
        if not requests:
            return
        overrides = dict(transcript.policy_overrides)
        default = self._policy(None, overrides)
        full = get_codec(transcript.format).parse(transcript.messages, text_protocol_rule(default))
        node_turns = full.index().node_turns
        refs_index = build_index(full)
        answers = [refs_index.references(answer_tokens(full, len(r)), len(r)) for r in requests]
        quoting = [quoted.quotes(full, len(r)) for r in requests]

        recorded = transcript.request_times()
        timestamps = any(t is not None for t in recorded)
        times = recorded if self.clock else []
        raw_costs = request_costs(
            list(map(Serializer(), requests)), self.pricing, self.count_tokens, times
        )
        raw_total = sum(c.cost for c in raw_costs)
        self._charge(self.summaries[0], transcript.name, raw_costs, raw_total,
                     readbacks=[0.0] * len(raw_costs), timestamps=timestamps)  # fmt: skip
        self.summaries[0].references += sum(len(a) for a in answers)
        self.summaries[0].quotes += sum(len(q) for q in quoting)

        for spec, summary in zip(self.policies, self.summaries[1:], strict=True):
            # A temporary local store, whatever store the policy names; the provider's
            # cache, the one the replay is priced with.
            layered = {**overrides, "spill.url": None, "spill.root": self.spill_root,
                       "ledger.cache_lifetime_seconds": self._lifetime}  # fmt: skip
            policy = self._policy(spec.path, layered)
            texts: list[str] = []
            readbacks: list[float] = []  # what each request charged for reading back
            figures = summary.sessions.setdefault(transcript.name, SessionFigures())
            read_back: set[tuple[int, int]] = set()  # results already read back
            session = _session_id(transcript.name)
            serialize = Serializer()
            with Pipeline(policy, host=self._host, session_id=session) as pipe:
                sent = zip(requests, answers, quoting, _sent_at(times, len(requests)), strict=True)
                for request, refs, quotes, now in sent:
                    result = pipe.process(request, format=transcript.format, now=now)
                    text = serialize(result.messages)
                    texts.append(text)
                    hidden = [token for token in sorted(refs) if is_hidden(token, text)]
                    summary.references += len(refs)
                    summary.hidden += len(hidden)
                    figures.references += len(refs)
                    figures.hidden += len(hidden)
                    causes = Causes(full, result.report.actions)
                    charged = self._read_back(
                        summary, figures, full=full, refs_index=refs_index, hidden=hidden,
                        text=text, causes=causes, read_back=read_back,
                    )  # fmt: skip
                    charged += self._quotes(summary, figures, full, quotes, text=text,
                                            causes=causes, read_back=read_back)  # fmt: skip
                    readbacks.append(charged)
                    recent = node_turns[len(request) - 1] - 1  # last two turns: >= recent
                    steps = {
                        a.step
                        for a in result.report.actions
                        if a.message_index is not None and node_turns[a.message_index] >= recent
                    }
                    summary.recent_compacted += Step.MICROCOMPACT in steps
                    summary.recent_spilled += Step.BUDGET in steps
                _count_chars(summary, result.report.actions)
            if self.progress is not None:
                self.progress(len(requests))
            costs = request_costs(texts, self.pricing, self.count_tokens, times)
            self._charge(summary, transcript.name, costs, raw_total, readbacks=readbacks,
                         timestamps=timestamps)  # fmt: skip
            figures.cost += sum(c.cost for c in costs)
            figures.raw_cost += raw_total

    def _read_back(
        self,
        summary: PolicySummary,
        figures: SessionFigures,
        *,
        full: Conversation,
        refs_index: ReferenceIndex,
        hidden: list[str],
        text: str,
        causes: Causes,
        read_back: set[tuple[int, int]],
    ) -> float:
        """Attribute each hidden reference to what hid its result, and charge reading the
        result back the first time one of its references is hidden in the session; returns
        what this request charged."""
        charged = 0.0
        for token in hidden:
            where = refs_index.source.get(token)
            if where is None:
                continue
            cause = causes.of(where)
            summary.hidden_by[cause] = summary.hidden_by.get(cause, 0) + 1
            if where in read_back:
                continue
            read_back.add(where)
            charged += self._charge_read_back(summary, figures, full, where, text)
        return charged

    def _quotes(
        self,
        summary: PolicySummary,
        figures: SessionFigures,
        full: Conversation,
        quotes: Sequence[quoted.Quote],
        *,
        text: str,
        causes: Causes,
        read_back: set[tuple[int, int]],
    ) -> float:
        """Count the request's quotes the policy hid (by what hid their result and the
        tool that gave the text) and the edits they force to read again, and charge reading
        each result back once, as for hidden references; returns what this request
        charged."""
        hidden = [quote for quote in quotes if quoted.is_hidden(quote, text)]
        summary.quotes += len(quotes)
        summary.quotes_hidden += len(hidden)
        figures.quotes += len(quotes)
        figures.quotes_hidden += len(hidden)
        for quote in hidden:
            cause = causes.of(quote.source)
            for table in (summary.quotes_hidden_by, figures.quotes_hidden_by):
                tools = table.setdefault(cause, {})
                tools[quote.source_tool] = tools.get(quote.source_tool, 0) + 1
        forced = {(q.call_id, q.source_tool) for q in hidden if q.in_edit}
        for _, tool in forced:
            summary.rereads[tool] = summary.rereads.get(tool, 0) + 1
        figures.rereads += len(forced)
        charged = 0.0
        for quote in hidden:
            if quote.source not in read_back:
                read_back.add(quote.source)
                charged += self._charge_read_back(summary, figures, full, quote.source, text)
        return charged

    def _charge_read_back(
        self,
        summary: PolicySummary,
        figures: SessionFigures,
        full: Conversation,
        where: tuple[int, int],
        text: str,
    ) -> float:
        """Charge what reading the result at ``where`` back costs (once per session: the
        callers keep count); returns the charge."""
        block = full.nodes[where[0]].blocks[where[1]]
        size = self.count_tokens(getattr(block, "text", ""))
        charge = self.readback_factor * readback_cost(self.pricing, self.count_tokens(text), size)
        summary.readback_cost += charge
        figures.readback_cost += charge
        return charge

    def _charge(
        self,
        summary: PolicySummary,
        name: str,
        costs: Sequence[RequestCost],
        raw_total: float,
        *,
        readbacks: Sequence[float],
        timestamps: bool,
    ) -> None:
        """Add a session's request costs to ``summary`` and keep its series; ``readbacks``
        is what each request charged for reading hidden results back."""
        series = SessionSeries(timestamps=timestamps, clock=timestamps and self.clock)
        running = effective = 0.0
        for cost, readback in zip(costs, readbacks, strict=True):
            running += cost.cost
            effective += cost.cost + readback
            series.tokens.append(cost.tokens)
            series.costs.append(running)
            series.effective.append(effective)
            summary.requests += 1
            summary.tokens += cost.tokens
            summary.cached_tokens += cost.cached_tokens
            summary.cost += cost.cost
            summary.expired += cost.expired
            summary.peak_tokens = max(summary.peak_tokens, cost.tokens)
            if self.window is not None and cost.tokens > self.window:
                summary.over_window += 1
        summary.raw_cost += raw_total
        summary.series[name] = series


def _count_chars(summary: PolicySummary, actions: Sequence[Action]) -> None:
    """Count what the last request of a session (its ``actions``) carries spilled,
    compacted, and added."""
    for action in actions:
        saved = action.chars_before - action.chars_after
        if saved < 0:
            summary.chars_added -= saved
        elif action.step == Step.BUDGET:
            summary.chars_spilled += saved
        elif action.step == Step.MICROCOMPACT:
            summary.chars_compacted += saved


def _session_id(name: str) -> str:
    return "sim-" + "".join(c if c.isalnum() else "-" for c in name)[:48]


#: The cause of a hidden result no action of the request names.
OTHER = "other"


class Causes:
    """What hid a result in one processed request, for hidden references and hidden
    quotes alike: ``step:kind`` of the last action of the request's report on the result
    (by its call id, or by its message for a text-protocol output), :data:`OTHER` when
    none names it. Indexed once per request: a request can hide hundreds of quotes."""

    def __init__(self, full: Conversation, actions: Sequence[Action]) -> None:
        self._full = full
        self._by_call: dict[str, str] = {}
        self._by_message: dict[int, str] = {}
        for action in actions:  # the last action on a result wins
            cause = f"{action.step}:{action.kind}"
            self._by_call[action.tool_call_id] = cause
            if action.message_index is not None:
                self._by_message[action.message_index] = cause

    def of(self, where: tuple[int, int]) -> str:
        """What hid the result at ``where``, (message, block) of the full conversation."""
        call_id = getattr(self._full.nodes[where[0]].blocks[where[1]], "call_id", "")
        if call_id:
            return self._by_call.get(call_id, OTHER)
        return self._by_message.get(where[0], OTHER)


def _sent_at(times: Sequence[float | None], count: int) -> list[float]:
    """When each of ``count`` requests is sent, for the pipeline's clock (a request after
    an idle gap finds the cache cold): its recorded time, or that of the one before
    (none recorded: 0, no gaps)."""
    out, now = [], 0.0
    for k in range(count):
        sent = times[k] if k < len(times) else None
        now = sent if sent is not None else now
        out.append(now)
    return out
