"""What ``GET /metrics`` reports (Prometheus text format), one registry per proxy."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from middleware.policy.reload import PolicyStatus
from middleware.report import Report

#: Seconds: from a fraction of a millisecond (a short history) to seconds (a huge one).
PROCESS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
UPSTREAM_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Metrics:
    """The proxy's counters and histograms."""

    def __init__(self, policies: Callable[[], Mapping[str, PolicyStatus]]) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # `_created` doubles a scrape
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "chatcli_proxy_requests", "Requests answered, by route and status.",
            ["route", "status"], registry=r,
        )  # fmt: skip
        self.actions = Counter(
            "chatcli_proxy_actions", "What the steps did to requests, by step and kind "
            "(pairing repairs, results spilled, results compacted, ...).",
            ["step", "kind"], registry=r,
        )  # fmt: skip
        self.chars_removed = Counter(
            "chatcli_proxy_chars_removed", "Characters of tool results the steps took out of "
            "requests (kept in the spill store).", registry=r,
        )  # fmt: skip
        self.passthrough = Counter(
            "chatcli_proxy_passthrough", "Requests forwarded untouched, by reason (not JSON, "
            "not a conversation, ...).", ["reason"], registry=r,
        )  # fmt: skip
        self.failures = Counter(
            "chatcli_proxy_failures", "Requests the pipeline could not process (forwarded "
            "unchanged when fail_open, else answered 502).", ["error"], registry=r,
        )  # fmt: skip
        self.continued = Counter(
            "chatcli_proxy_continued", "Requests that continued the previous request of their "
            "conversation and were worked on in their new part only.", registry=r,
        )  # fmt: skip
        self.process_seconds = Histogram(
            "chatcli_proxy_process_seconds", "Time the pipeline took on a request.",
            buckets=PROCESS_BUCKETS, registry=r,
        )  # fmt: skip
        self.upstream_seconds = Histogram(
            "chatcli_proxy_upstream_seconds", "Time from forwarding a request to the "
            "upstream's response headers.", ["upstream"], buckets=UPSTREAM_BUCKETS, registry=r,
        )  # fmt: skip
        self.registry.register(_PolicyCollector(policies))

    def record_report(self, report: Report) -> None:
        for action in report.actions:
            self.actions.labels(action.step, action.kind).inc()
        removed = report.result_chars_before - report.result_chars_after
        if removed > 0:
            self.chars_removed.inc(removed)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _PolicyCollector(Collector):
    """Reloads of each policy served, read from its status when scraped."""

    def __init__(self, policies: Callable[[], Mapping[str, PolicyStatus]]) -> None:
        self.policies = policies

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        reloads = CounterMetricFamily(
            "chatcli_proxy_policy_reloads", "Reloads of a served policy, by outcome: a new "
            "snapshot swapped in, or rejected (the last good policy kept).",
            labels=["policy", "outcome"],
        )  # fmt: skip
        last_ok = GaugeMetricFamily(
            "chatcli_proxy_policy_last_reload_ok", "1 if the last edit of the policy was "
            "valid (or it was never edited), 0 if it was rejected.", labels=["policy"],
        )  # fmt: skip
        for name, status in self.policies().items():
            reloads.add_metric([name, "swapped"], status.generation - 1)
            reloads.add_metric([name, "rejected"], status.rejected)
            last_ok.add_metric([name], 1.0 if status.last_reload_ok else 0.0)
        yield reloads
        yield last_ok
