"""The ASGI application: clean the history of each model request, relay the providers' APIs.

``POST /v1/messages``, ``/v1/messages/count_tokens`` (Anthropic), ``/v1/chat/completions``
and ``/v1/responses`` (OpenAI) and Gemini's model methods have their request body's history
run through the pipeline, in its own wire format, before the body is forwarded with every
other field as it was; the ``usage`` of their answers goes to the ledger
(:mod:`middleware.ledger`), and so does that of the billed routes forwarded as they came
(``/v1/responses/compact``, ``/v1/completions``, ``/v1/embeddings``: :attr:`.Route.cleaned`).
Every other path and method under a provider's API (``/v1/...``, ``/v1beta/...``) is
forwarded untouched; any other path is answered 404. ``/policy/NAME/`` in front of a path selects
another policy. ``GET /healthz``, ``/metrics``, ``/recall/{session}/{file}``,
``GET /sessions``, ``GET /sessions/{session}`` and ``DELETE /sessions/{session}`` are the
proxy's own (:mod:`middleware.proxy.own_routes`), held to the proxy's own origin
(:mod:`middleware.proxy.origin`). A model request's body is cleaned by
:mod:`middleware.proxy.cleaner`.

The proxy is never the reason a request fails: a body that is not JSON, or not a
conversation, goes through untouched; one the pipeline cannot process goes through
unchanged when ``proxy.fail_open`` (the default), and the failure is logged and counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

import anyio.to_thread
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from middleware.conversations.cleaning import Cleaned
from middleware.conversations.front import Conversations
from middleware.conversations.joining import Lobby
from middleware.conversations.sessions import SessionPool
from middleware.errors import MiddlewareError
from middleware.formats.declarations import ErrorKind, Provider
from middleware.formats.routes import providers, proxy_route
from middleware.ledger import Ledger
from middleware.ledger.callers import caller_of
from middleware.plugin.host import PluginHost
from middleware.policy.secrets import redact_urls
from middleware.policy.settings import bind
from middleware.proxy.admission import ByteGate, NotAdmitted
from middleware.proxy.cleaner import RequestCleaner, who
from middleware.proxy.console.book import ConsoleBook, ConsoleSettings
from middleware.proxy.console.pages import console_routes
from middleware.proxy.errors import error_body
from middleware.proxy.exchange import Exchange
from middleware.proxy.metrics import Metrics
from middleware.proxy.observe import Observer
from middleware.proxy.origin import OwnOrigin, declares_json, request_path
from middleware.proxy.own_routes import OwnRoutes
from middleware.proxy.policies import PolicyCatalog
from middleware.proxy.settings import ProxySettings
from middleware.proxy.upstream import (
    REQUEST_DROPPED,
    PathOutsideBase,
    Relay,
    Upstream,
    forwarded_headers,
    forwarded_url,
)
from middleware.records import Records, RecordSettings

logger = logging.getLogger(__name__)

#: The answer header naming the session a cleaned request was filed under.
SESSION_ANSWER_HEADER = "x-chatcli-session"


@dataclass
class Proxy:
    """The proxy's state: policies, sessions, the upstream pool and metrics."""

    catalog: PolicyCatalog
    host: PluginHost
    #: What is kept of each conversation between its requests, and the ledger their
    #: answers are billed to (read back from ledger.file and written to it, if the policy
    #: names one when the proxy starts).
    conversations: Conversations = field(init=False)
    metrics: Metrics = field(init=False)
    #: Bodies being cleaned, by their size (proxy.cleaning_bytes).
    cleaning: ByteGate = field(init=False)
    #: What the console at ``/ui`` records of each request, in the records (``None``:
    #: proxy.console.enabled is false); what it remembers of each session counts in the
    #: session pool's memory budget.
    console: ConsoleBook | None = field(init=False)
    #: Where observe mode projects requests, beside the requests that go as they came.
    observer: Observer = field(init=False)
    #: The requests of Gemini CLI runs waiting to be filed under their conversation.
    lobby: Lobby = field(init=False, default_factory=Lobby)
    #: ``/healthz``, ``/metrics``, ``/recall``, ``/sessions``: the routes that are not the
    #: forwarding path.
    own: OwnRoutes = field(init=False)
    #: What runs the pipeline on a model request's body and counts what it did.
    cleaner: RequestCleaner = field(init=False)
    upstream: Upstream | None = None

    def __post_init__(self) -> None:
        policy = self.catalog.default.policy
        replica = bind(policy, RecordSettings).replica_name(self.settings.port)
        self.conversations = Conversations.open(self.host, policy, replica=replica)
        self.metrics = Metrics(
            self.catalog.statuses, self.conversations.pool, self.conversations.records.health
        )
        self.cleaning = ByteGate(self.settings.cleaning_bytes)
        self.observer = Observer(lambda outcome: self.metrics.observed.labels(outcome).inc())
        console = bind(self.catalog.default.policy, ConsoleSettings)
        self.console = ConsoleBook(self.records, console.request_bytes) if console.enabled else None
        self.conversations.pool.shares = self.console
        self.cleaner = RequestCleaner(
            self.catalog, self.conversations, self.metrics, self.console, self.observer, self.lobby
        )
        self.own = OwnRoutes(self.catalog, self.conversations, self.metrics)

    @property
    def ledger(self) -> Ledger:
        """What the answers' usage says was billed, per session and in total."""
        return self.conversations.ledger

    @property
    def records(self) -> Records:
        """Where the ledger and the console record: every replica's, in one database."""
        return self.conversations.records

    @property
    def sessions(self) -> SessionPool:
        """The conversations' states, under their memory budget."""
        return self.conversations.pool

    @property
    def settings(self) -> ProxySettings:
        """The ``proxy`` section of the proxy's own policy, as hot reload last left it
        (where it listens and the upstream pool are fixed when it starts)."""
        return self.catalog.settings

    # -- the catch-all route: clean if it is a model request, then forward ---------------

    async def forward(self, request: Request) -> Response | Relay:
        where = request_path(request.scope)
        policy_name = where.policy
        route = proxy_route(request.method, where.path)
        provider = (
            route.codec.provider if route
            else _provider_of(request.headers, request.query_params, self.settings)
        )  # fmt: skip
        upstream = self.settings.upstream(provider)
        try:
            url = forwarded_url(
                upstream, where.raw, request.scope["query_string"].decode("latin-1")
            )
        except PathOutsideBase as exc:
            return self._answer("other", provider, 400, "bad_request", str(exc))
        if not where.relayed:  # a page an upstream serves is never served as the console's
            return self._answer("other", provider, 404, "not_found", _not_relayed(where.path))
        # The route's template, never the path: a Gemini path holds the model a client
        # chose, and each label is a metrics series held for ever.
        route_label = route.template if route else "other"
        content_type = request.headers.get("content-type", "")
        if route is not None and not declares_json(content_type):
            return self._answer(route_label, provider, 415, "not_json", _not_json(content_type))
        started = time.perf_counter()
        try:
            source = (
                self.catalog.default if policy_name is None
                else await anyio.to_thread.run_sync(self.catalog.get, unquote(policy_name))
            )  # fmt: skip
        except LookupError as exc:
            return self._answer(route_label, provider, 404, "not_found", str(exc))
        except MiddlewareError as exc:  # the named policy file is not valid
            return self._answer(route_label, provider, 404, "not_found", str(exc))
        try:
            with anyio.fail_after(self.settings.body_timeout_seconds):
                body = await self._read_body(request)
        except TimeoutError:
            seconds = self.settings.body_timeout_seconds
            return self._answer(
                route_label, provider, 408, "request_timeout",
                f"the request body did not arrive within {seconds:g} s "
                "(proxy.body_timeout_seconds)",
            )  # fmt: skip
        except ClientDisconnect:  # gone mid-body, or its chunked framing broke (a 400 sent)
            return self._answer(route_label, provider, 400, "bad_request",
                                "the request body ended before it was whole")  # fmt: skip
        if body is None:
            limit = self.settings.max_body_bytes
            return self._answer(
                route_label, provider, 413, "too_large",
                f"the request body is over the proxy's limit of {limit:,} bytes "
                "(proxy.max_body_bytes)",
            )  # fmt: skip
        cleaned, note, late, projection = Cleaned(body), None, None, None
        lowered = {k.lower(): v for k, v in request.headers.items()}
        caller = caller_of(lowered, request.query_params)
        if route is not None and route.cleaned and self.settings.observing:
            cleaned, projection = self.cleaner.observe(body, route, lowered, source, caller)
        elif route is not None:
            settings = self.settings
            self.cleaning.limit = settings.cleaning_bytes  # as reloaded
            self.cleaning.line_limit = settings.waiting_bytes
            try:
                async with self.cleaning.admitted(len(body), settings.cleaning_wait_seconds):
                    cleaned, note, late = await anyio.to_thread.run_sync(
                        self.cleaner.clean, body, route, lowered, source, caller
                    )
            except NotAdmitted as exc:
                self.metrics.passthrough.labels("busy").inc()
                if not settings.fail_open:
                    return self._answer(
                        route_label, provider, 503, "overloaded",
                        f"chatcli-middleware is too busy to clean this request ({exc}: "
                        "proxy.cleaning_wait_seconds, proxy.waiting_bytes); proxy.fail_open "
                        "is false, so it was not forwarded",
                    )  # fmt: skip
                cleaned = Cleaned(body, untouched="busy")
            if cleaned.error is not None and not self.settings.fail_open:
                return self._answer(
                    route_label, provider, 502, "not_processed",
                    f"chatcli-middleware could not process this request "
                    f"({type(cleaned.error).__name__}: {cleaned.error}); proxy.fail_open is "
                    "false, so it was not forwarded",
                )  # fmt: skip
        exchange = Exchange(
            self.metrics, self.conversations, self.settings.access_log, request, route_label,
            provider, cleaned, source.policy, started,
            billed=route.codec if route is not None and route.billed else None,
            upstream=redact_urls(upstream),
            console_seconds=None if note is None else note.seconds,
            who=who(lowered, caller, cleaned, route.codec.name if route is not None else None,
                     note),
            projection=projection,
        )  # fmt: skip
        if cleaned.part is not None and cleaned.session is not None and cleaned.waits:
            exchange.waiting = self.lobby.wait(cleaned.session, cleaned.part, caller)
            exchange.late = late
        return self._relay(request, url, cleaned, exchange)

    def _relay(self, request: Request, url: str, cleaned: Cleaned, exchange: Exchange) -> Relay:
        """The relay of ``cleaned`` to ``url``, accounted for by ``exchange``."""
        if self.upstream is None:
            raise RuntimeError("the proxy's upstream pool starts with the app's lifespan")
        headers = forwarded_headers(request.headers.raw, drop=REQUEST_DROPPED)
        # The session the request was filed under, for a client that will end it
        # (``DELETE /sessions/{id}`` takes it as it is written here).
        ours = [(SESSION_ANSWER_HEADER, quote(cleaned.session.session, safe=""))] if (
            cleaned.session is not None) else []  # fmt: skip
        return Relay(
            self.upstream, request.method, url, headers, cleaned.body,
            on_headers=exchange.on_headers, on_done=exchange.on_done,
            on_error=exchange.on_error, on_chunk=exchange.on_chunk, answer_headers=ours,
        )  # fmt: skip

    async def _read_body(self, request: Request) -> bytes | None:
        """The whole body, or ``None`` if it is over the limit (read no further)."""
        limit = self.settings.max_body_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return None
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    def _answer(
        self, route: str, provider: Provider, status: int, kind: ErrorKind, message: str
    ) -> Response:
        self.metrics.requests.labels(route, str(status)).inc()
        return Response(error_body(provider, kind, message), status, media_type="application/json")

    def close(self) -> None:
        self.observer.close()
        self.lobby.close()  # what still waits is filed under its own key, then recorded
        self.conversations.close()
        self.catalog.close()


def create_app(proxy: Proxy) -> Starlette:
    """The ASGI application serving ``proxy``."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        proxy.upstream = Upstream(proxy.settings)
        proxy.conversations.records.prune_every()  # old console records, once an hour
        try:
            yield
        finally:
            await proxy.upstream.aclose()
            await anyio.to_thread.run_sync(proxy.close)

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    return Starlette(
        routes=[
            Route("/healthz", proxy.own.healthz, methods=["GET"]),
            Route("/metrics", proxy.own.metrics_text, methods=["GET"]),
            Route("/recall/{session:path}/{file}", proxy.own.recall, methods=["GET"]),
            Route("/sessions", proxy.own.ledger_total, methods=["GET"]),
            Route("/sessions/{session:path}", proxy.own.session_ledger, methods=["GET"]),
            Route("/sessions/{session:path}", proxy.own.end_session, methods=["DELETE"]),
            *console_routes(proxy, proxy.own.may_recall, proxy.own.read),
            Route("/{path:path}", proxy.forward, methods=methods),
        ],
        middleware=[Middleware(OwnOrigin, policy=lambda: proxy.catalog.default.policy)],
        lifespan=lifespan,
    )


def _not_relayed(path: str) -> str:
    prefixes = ", ".join(dict.fromkeys(x for p in providers() for x in p.api_prefixes))
    shown = path if len(path) <= 200 else path[:200] + "..."
    return (
        f"chatcli-middleware relays only the providers' API paths ({prefixes}, each after "
        f"an optional /policy/NAME/), and {shown!r} is none of them: check the client's "
        "base URL (an OpenAI client's ends in /v1)"
    )


def _not_json(content_type: str) -> str:
    said = f"Content-Type {content_type[:100]!r}" if content_type else "no Content-Type"
    return (
        f"a model request's body is JSON: send it with Content-Type: application/json "
        f"(this one has {said}); chatcli-middleware refuses it unprocessed, as a web page "
        "can send any other type across sites without asking"
    )


def _provider_of(
    headers: Mapping[str, str], query: Mapping[str, str], settings: ProxySettings
) -> Provider:
    """Who a request not on a cleaned route is for: the first provider that claims its
    headers or query (Anthropic's version or key header, or Claude Code; OpenAI's bearer
    token; Google's key), else the one ``proxy.other_requests`` names."""
    claimed = next((p for p in providers() if p.claims(headers, query)), None)
    return claimed if claimed is not None else settings.other_provider
