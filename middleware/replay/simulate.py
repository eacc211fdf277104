"""Replay recorded sessions under policies and charge them with the cost model."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
from middleware.replay.hidden import Causes, HiddenResults
from middleware.replay.references import answer_tokens, build_index
from middleware.replay.summaries import PolicySummary, SessionFigures, SessionSeries
from middleware.replay.transcripts import Transcript
from middleware.report import Action, Step

#: Name of the baseline: the requests exactly as recorded.
RAW = "none"


#: A cache lifetime no recorded gap reaches (a century).
FOREVER = 100 * 365 * 86_400.0


@dataclass(frozen=True)
class PolicySpec:
    """A policy to simulate: a display name and a policy file (``None``: the default)."""

    name: str
    path: str | Path | None


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
    (:func:`~middleware.replay.costs.readback_cost`, times ``readback_factor``), once per
    result and session: the model that read it back has it again
    (:class:`~middleware.replay.hidden.HiddenResults`)."""
    with tempfile.TemporaryDirectory(prefix="chatcli-simulate-") as spill_root:
        run = _Simulation(
            policies,
            pricing=pricing,
            window=window,
            count_tokens=count_tokens,
            spill_root=spill_root,
            progress=progress,
            readback_factor=readback_factor,
            clock=clock,
        )
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
        self._charge(
            self.summaries[0],
            transcript.name,
            raw_costs,
            raw_total,
            readbacks=[0.0] * len(raw_costs),
            timestamps=timestamps,
        )
        self.summaries[0].references += sum(len(a) for a in answers)
        self.summaries[0].quotes += sum(len(q) for q in quoting)

        for spec, summary in zip(self.policies, self.summaries[1:], strict=True):
            # A temporary local store, whatever store the policy names; the provider's
            # cache, the one the replay is priced with.
            layered = {
                **overrides,
                "spill.url": None,
                "spill.root": self.spill_root,
                "ledger.cache_lifetime_seconds": self._lifetime,
            }
            policy = self._policy(spec.path, layered)
            texts: list[str] = []
            readbacks: list[float] = []  # what each request charged for reading back
            figures = summary.sessions.setdefault(transcript.name, SessionFigures())
            hiding = HiddenResults(
                summary,
                figures,
                full,
                refs_index,
                pricing=self.pricing,
                count_tokens=self.count_tokens,
                factor=self.readback_factor,
            )
            session = _session_id(transcript.name)
            serialize = Serializer()
            with Pipeline(policy, host=self._host, session_id=session) as pipe:
                sent = zip(requests, answers, quoting, _sent_at(times, len(requests)), strict=True)
                for request, refs, quotes, now in sent:
                    result = pipe.process(request, format=transcript.format, now=now)
                    text = serialize(result.messages)
                    texts.append(text)
                    causes = Causes(full, result.report.actions)
                    charged = hiding.references(refs, text, causes)
                    charged += hiding.quotes(quotes, text, causes)
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
            self._charge(
                summary,
                transcript.name,
                costs,
                raw_total,
                readbacks=readbacks,
                timestamps=timestamps,
            )
            figures.cost += sum(c.cost for c in costs)
            figures.raw_cost += raw_total

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
