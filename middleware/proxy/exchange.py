"""One request's trip upstream and back, as the proxy accounts for it: the status and
latency counted, the answer's usage read as it is relayed and put in the ledger, and the
access log line written when it ends (for a request that waits for its conversation to
show itself, :mod:`middleware.conversations.joining`, once it is filed)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
from starlette.requests import Request

from middleware.conversations.cleaning import Cleaned
from middleware.conversations.front import Conversations
from middleware.conversations.joining import Waiting
from middleware.conversations.keys import SessionKey
from middleware.formats.base import Codec
from middleware.formats.declarations import Provider
from middleware.ledger import Caller, UsageReader
from middleware.ledger.sums import Entry
from middleware.logs import Fields
from middleware.policy import Policy
from middleware.proxy.errors import error_body
from middleware.proxy.metrics import Metrics
from middleware.proxy.observe import Projection
from middleware.report import Step

logger = logging.getLogger(__name__)
access_logger = logging.getLogger("middleware.proxy.access")


@dataclass
class Exchange:
    """The callbacks a :class:`~middleware.proxy.upstream.Relay` makes for one request.

    ``billed`` is the codec of a model call whose answer is billed, its route's (``None``
    for a request that is not one: a token count, a listing, anything forwarded as it
    came).
    """

    metrics: Metrics
    conversations: Conversations
    access_log: bool
    request: Request
    route: str
    provider: Provider
    cleaned: Cleaned
    policy: Policy
    started: float
    billed: Codec | None = None
    upstream: str = ""
    status: int | None = None
    reader: UsageReader | None = field(default=None, repr=False)
    #: Seconds the console took to record the request (``None``: it records none).
    console_seconds: float | None = None
    #: Who asked, the request's tags, its agent and the console's record of it.
    who: Caller | None = None
    #: The request waits to be filed under its conversation (``None``: it is filed as it
    #: came), and then makes its console record and says who asked with this.
    waiting: Waiting | None = None
    late: Callable[[Cleaned], Caller] | None = None
    #: Observe mode: the request went as it came, and its answer is billed once the
    #: pipeline, beside it, made what it would have sent of it (or gave up).
    projection: Projection | None = None

    def on_headers(self, code: int, seconds: float, headers: httpx.Headers) -> None:
        self.status = code
        self.metrics.upstream_seconds.labels(self.provider.name).observe(seconds)
        if self.billed is not None and 200 <= code < 300:
            self.reader = UsageReader(
                self.billed, headers.get("content-type", ""), headers.get("content-encoding", "")
            )

    def on_chunk(self, chunk: bytes) -> None:
        if self.reader is not None:
            self.reader.feed(chunk)

    def on_error(self, exc: Exception) -> tuple[int, bytes]:
        logger.error("cannot reach the upstream %s: %s", self.upstream, exc)
        self.status = 502
        message = f"chatcli-middleware could not reach {self.upstream}: {exc}"
        return 502, error_body(self.provider, "upstream_unreachable", message)

    def on_done(self, whole: bool) -> None:
        code = self.status if self.status is not None else 502
        self.metrics.requests.labels(self.route, str(code)).inc()
        ms = round((time.perf_counter() - self.started) * 1000, 1)
        if self.waiting is None:
            self._file(code, whole, ms)
            return
        ended = self.conversations.ledger.clock()
        self.waiting.end(lambda key: self._file(code, whole, ms, key, ended))

    def _file(
        self,
        code: int,
        whole: bool,
        ms: float,
        key: SessionKey | None = None,
        ended: float | None = None,
    ) -> None:
        """Bill the answer and write the log line, under ``key`` if the request waited
        for its conversation (its answer ``ended`` then)."""
        if key is not None:
            self.cleaned = replace(self.cleaned, session=key)
            self.who = self.late(self.cleaned) if self.late is not None else self.who
        entry = self._bill(ended) if self.reader is not None else None
        if self.access_log:
            summary = f"{self.request.method} {self.request.url.path} {code}"
            access_logger.info(Fields(self._line(code, whole, entry, ms), summary))

    def _bill(self, ended: float | None) -> Entry | None:
        """Put the answer in the ledger and count it: its :class:`Entry`, or ``None`` if
        its usage could not be read."""
        assert self.reader is not None
        if self.projection is not None:
            reader = self.reader
            self.projection.then(lambda done: self._bill_observed(reader, done, ended))
            return None
        entry = self.conversations.answer(
            self.reader, self.cleaned, self.policy, self.who, now=ended
        )
        self.metrics.record_bill(entry)
        return entry

    def _bill_observed(
        self, reader: UsageReader, projection: Projection, ended: float | None
    ) -> None:
        """Bill the answer of a request that went as it came, with what its cleaned
        request would have cost where it was projected."""
        cleaned, who = projection.result or (self.cleaned, self.who)
        entry = self.conversations.answer(reader, cleaned, self.policy, who, now=ended)
        self.metrics.record_bill(entry)

    def _line(self, status: int, whole: bool, entry: Entry | None, ms: float) -> dict[str, Any]:
        """The access log line of the exchange (its fields)."""
        cleaned, report = self.cleaned, self.cleaned.report
        line: dict[str, Any] = {
            "method": self.request.method,
            "path": self.request.url.path,
            "route": self.route,
            "status": status,
            "session": cleaned.session.session if cleaned.session else None,
            "session_from": cleaned.session.source if cleaned.session else None,
            "ms": ms,
            "process_ms": round(cleaned.seconds * 1000, 2),
        }
        if self.console_seconds is not None:
            line["console_ms"] = round(self.console_seconds * 1000, 2)
        line["complete"] = whole
        if report is not None:
            kinds: dict[str, int] = {}
            for action in report.actions:
                kinds[action.kind] = kinds.get(action.kind, 0) + 1
            line.update(
                repairs=len(report.by_step(Step.PAIRING)),
                actions=kinds,
                chars_before=report.result_chars_before,
                chars_after=report.result_chars_after,
            )
        if entry is not None:
            line["model"] = entry.model
            line["billed"] = {**entry.billed.as_dict(), "dollars": _rounded(entry.dollars)}
            line["without"] = {
                **entry.without.as_dict(),
                "dollars": _rounded(entry.dollars_without),
            }
        if self.projection is not None:
            line["observed"] = True
        if cleaned.untouched:
            line["untouched"] = cleaned.untouched
        if cleaned.error is not None:
            line["error"] = f"{type(cleaned.error).__name__}: {cleaned.error}"
        return line


def _rounded(dollars: float | None) -> float | None:
    return None if dollars is None else round(dollars, 6)
