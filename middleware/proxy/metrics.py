"""What ``GET /metrics`` reports (Prometheus text format), one registry per proxy."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from middleware.cache import DerivedCache
from middleware.conversations.readbacks import ReadBack
from middleware.ledger import Usage
from middleware.ledger.sums import Entry
from middleware.policy.reload import PolicyStatus
from middleware.report import Report

#: Tools named in the read-back counters at most: the names are the client's, and each
#: label is a series held for ever; the others are counted as ``other``.
MAX_TOOL_LABELS = 64
#: Seconds: from a fraction of a millisecond (a short history) to seconds (a huge one).
PROCESS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
UPSTREAM_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Sessions(Protocol):
    """What the metrics read of the session pool when scraped."""

    @property
    def held_bytes(self) -> int: ...

    @property
    def evictions(self) -> int: ...

    @property
    def cache(self) -> DerivedCache | None: ...

    def __len__(self) -> int: ...


class Metrics:
    """The proxy's counters and histograms."""

    def __init__(
        self,
        policies: Callable[[], Mapping[str, PolicyStatus]],
        sessions: Sessions | None = None,
        records: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # `_created` doubles a scrape
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "chatcli_proxy_requests",
            "Requests answered, by route and status.",
            ["route", "status"],
            registry=r,
        )
        self.actions = Counter(
            "chatcli_proxy_actions",
            "What the steps did to requests, by step and kind "
            "(pairing repairs, results spilled, results compacted, ...).",
            ["step", "kind"],
            registry=r,
        )
        self.chars_removed = Counter(
            "chatcli_proxy_chars_removed",
            "Characters of tool results the steps took out of requests (kept in the spill store).",
            registry=r,
        )
        self.observed = Counter(
            "chatcli_proxy_observed",
            "Requests forwarded as they came in observe mode, by what became of their "
            "projection: projected, untouched (not a conversation), full (proxy.observe_bytes), "
            "late (proxy.observe_seconds), failed.",
            ["outcome"],
            registry=r,
        )
        self.passthrough = Counter(
            "chatcli_proxy_passthrough",
            "Requests forwarded untouched, by reason (not JSON, not a conversation, ...).",
            ["reason"],
            registry=r,
        )
        self.failures = Counter(
            "chatcli_proxy_failures", "Requests the pipeline could not process (forwarded "
            "unchanged when fail_open, else answered 502).", ["error"], registry=r,
        )  # fmt: skip
        self.continued = Counter(
            "chatcli_proxy_continued",
            "Requests that continued the previous request of their "
            "conversation and were worked on in their new part only.",
            registry=r,
        )
        self.process_seconds = Histogram(
            "chatcli_proxy_process_seconds",
            "Time the pipeline took on a request.",
            buckets=PROCESS_BUCKETS,
            registry=r,
        )
        self.upstream_seconds = Histogram(
            "chatcli_proxy_upstream_seconds", "Time from forwarding a request to the "
            "upstream's response headers.", ["upstream"], buckets=UPSTREAM_BUCKETS, registry=r,
        )  # fmt: skip
        self.billed_tokens = Counter(
            "chatcli_proxy_billed_tokens",
            "Tokens the providers billed, as their answers' "
            "usage reports them, by kind (input, cache_read, cache_write_5m, cache_write_1h, "
            "output) and by the ledger.prices entry that priced them (unpriced: none).",
            ["kind", "priced_as"],
            registry=r,
        )
        self.estimated_tokens = Counter(
            "chatcli_proxy_estimated_tokens_without", "Tokens the same requests would have "
            "been billed unprocessed (an estimate from the bill and what the steps changed), "
            "by kind and price entry.", ["kind", "priced_as"], registry=r,
        )  # fmt: skip
        self.billed_dollars = Counter(
            "chatcli_proxy_billed_dollars",
            "US dollars billed, at ledger.prices, by price entry.",
            ["priced_as"],
            registry=r,
        )
        self.estimated_dollars = Counter(
            "chatcli_proxy_estimated_dollars_without", "US dollars the same requests would "
            "have cost unprocessed (an estimate), by price entry.", ["priced_as"], registry=r,
        )  # fmt: skip
        self.cache_expected = Counter(
            "chatcli_proxy_cache_read_expected_tokens",
            "Tokens the cost model the schedule "
            "decides with expected answers to read from the prompt cache (what each request "
            "shares with the previous one of its session, within ledger.cache_lifetime_seconds).",
            ["priced_as"],
            registry=r,
        )
        self.cache_missed = Counter(
            "chatcli_proxy_cache_read_missed_tokens",
            "Of those, the tokens the provider did "
            "not report as read: a provider that caches nothing or for less long, or a miss "
            "after a rewrite. Its ratio to the expected tokens is the model's error.",
            ["priced_as"],
            registry=r,
        )
        self.usage_unread = Counter(
            "chatcli_proxy_usage_unread",
            "Answers to model requests whose usage could not be "
            "read (an error, a stream cut off, an encoding the ledger does not read).",
            registry=r,
        )
        self.readbacks = Counter(
            "chatcli_proxy_readbacks", "Tool calls that went back for what a step hid "
            "(middleware.conversations.readbacks), by kind (spill_file, recall, reread), the "
            "step that hid it and the tool that read it back.", ["kind", "step", "tool"],
            registry=r,
        )  # fmt: skip
        self.readback_chars = Counter(
            "chatcli_proxy_readback_chars", "Characters the read-backs brought back into the "
            "context (their results as the requests carry them), by kind and step.",
            ["kind", "step"], registry=r,
        )  # fmt: skip
        self.readback_errors = Counter(
            "chatcli_proxy_readback_errors", "Requests whose read-backs could not be told "
            "(logged; the request went on, its read-backs uncounted).", registry=r,
        )  # fmt: skip
        self.recalls = Counter(
            "chatcli_proxy_recalls", "Calls of GET /recall (the console's own left out), by "
            "the step that spilled the output (unknown: no conversation held here saw it) "
            "and status.", ["step", "status"], registry=r,
        )  # fmt: skip
        self._tools: set[str] = set()
        self._tools_lock = threading.Lock()
        #: The bill counters of each price entry (:meth:`_bill_series`).
        self._bills: dict[str, tuple[tuple[Any, ...], ...]] = {}
        self.registry.register(_PolicyCollector(policies))
        if sessions is not None:
            self.registry.register(_SessionCollector(sessions))
        if records is not None:
            self.registry.register(_RecordsCollector(records))

    def record_report(self, report: Report) -> None:
        for action in report.actions:
            self.actions.labels(action.step, action.kind).inc()
        removed = report.result_chars_before - report.result_chars_after
        if removed > 0:
            self.chars_removed.inc(removed)

    def record_readbacks(self, readbacks: Sequence[ReadBack]) -> None:
        for found in readbacks:
            tool = found.tool
            with self._tools_lock:
                if tool not in self._tools:
                    if len(self._tools) >= MAX_TOOL_LABELS:
                        tool = "other"
                    else:
                        self._tools.add(tool)
            self.readbacks.labels(found.kind, found.step, tool).inc()
            self.readback_chars.labels(found.kind, found.step).inc(found.result_chars)

    def record_bill(self, entry: Entry | None) -> None:
        """Count one answer's bill (``None``: its usage was not read)."""
        if entry is None:
            self.usage_unread.inc()
            return
        billed, estimated, dollars, cache = self._bill_series(entry.priced_as or "unpriced")
        for series, usage in ((billed, entry.billed), (estimated, entry.without)):
            for child, tokens in zip(series, usage.as_dict().values(), strict=True):
                if tokens:
                    child.inc(tokens)
        if entry.expected_read is not None:
            cache[0].inc(entry.expected_read)
            cache[1].inc(max(0, entry.expected_read - entry.billed.cache_read))
        if entry.dollars is not None and entry.dollars_without is not None:
            dollars[0].inc(entry.dollars)
            dollars[1].inc(entry.dollars_without)

    def _bill_series(self, priced_as: str) -> tuple[tuple[Any, ...], ...]:
        """The counters one price entry's bills go to, looked up once (a label lookup
        takes a lock; an answer adds to a dozen series)."""
        found = self._bills.get(priced_as)
        if found is None:
            kinds = Usage().as_dict()
            found = self._bills[priced_as] = (
                tuple(self.billed_tokens.labels(kind, priced_as) for kind in kinds),
                tuple(self.estimated_tokens.labels(kind, priced_as) for kind in kinds),
                (self.billed_dollars.labels(priced_as), self.estimated_dollars.labels(priced_as)),
                (self.cache_expected.labels(priced_as), self.cache_missed.labels(priced_as)),
            )
        return found

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _RecordsCollector(Collector):
    """What the records' writer did, read from its counts when scraped."""

    def __init__(self, health: Callable[[], Mapping[str, Any]]) -> None:
        self.health = health

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        health = self.health()
        yield GaugeMetricFamily(
            "chatcli_records_reachable",
            "1 if the records database (ledger.url) took the last write, 0 if it is away.",
            value=1.0 if health["reachable"] else 0.0,
        )
        yield GaugeMetricFamily(
            "chatcli_records_held_bytes",
            "Bytes of records waiting for the database (bounded by ledger.held_bytes).",
            value=health["held_bytes"],
        )
        yield CounterMetricFamily(
            "chatcli_records_dropped",
            "Records dropped because ledger.held_bytes of them were waiting already.",
            value=health["dropped"],
        )
        yield CounterMetricFamily(
            "chatcli_records_refused",
            "Records the database refused (each alone: the rest of its batch was written).",
            value=health["refused"],
        )


class _PolicyCollector(Collector):
    """Reloads of each policy served, read from its status when scraped."""

    def __init__(self, policies: Callable[[], Mapping[str, PolicyStatus]]) -> None:
        self.policies = policies

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        reloads = CounterMetricFamily(
            "chatcli_proxy_policy_reloads",
            "Reloads of a served policy, by outcome: a new "
            "snapshot swapped in, or rejected (the last good policy kept).",
            labels=["policy", "outcome"],
        )
        last_ok = GaugeMetricFamily(
            "chatcli_proxy_policy_last_reload_ok",
            "1 if the last edit of the policy was "
            "valid (or it was never edited), 0 if it was rejected.",
            labels=["policy"],
        )
        for name, status in self.policies().items():
            reloads.add_metric([name, "swapped"], status.generation - 1)
            reloads.add_metric([name, "rejected"], status.rejected)
            last_ok.add_metric([name], 1.0 if status.last_reload_ok else 0.0)
        yield reloads
        yield last_ok


class _SessionCollector(Collector):
    """The session pool's memory, read when scraped."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "chatcli_proxy_sessions",
            "Conversations whose pipeline the proxy holds.",
            value=len(self.sessions),
        )
        yield GaugeMetricFamily(
            "chatcli_proxy_session_state_bytes",
            "Bytes the conversations' state holds "
            "between requests (an estimate; bounded by proxy.session_memory_bytes).",
            value=self.sessions.held_bytes,
        )
        yield CounterMetricFamily(
            "chatcli_proxy_session_evictions",
            "Times a conversation's state was forgotten "
            "to stay under proxy.session_memory_bytes (its next request is processed in "
            "full).",
            value=self.sessions.evictions,
        )
        cache = self.sessions.cache
        if cache is not None:  # made at the first request
            stats = cache.stats()
            yield GaugeMetricFamily(
                "chatcli_proxy_cache_bytes",
                "Bytes the cache of reused work holds (an estimate; bounded by cache.max_bytes).",
                value=stats.bytes,
            )
