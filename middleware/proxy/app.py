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
proxy's own, held to the proxy's own origin (:mod:`middleware.proxy.origin`).

The proxy is never the reason a request fails: a body that is not JSON, or not a
conversation, goes through untouched; one the pipeline cannot process goes through
unchanged when ``proxy.fail_open`` (the default), and the failure is logged and counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TypeVar
from urllib.parse import quote, unquote

import anyio.to_thread
import sqlalchemy as sa
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from middleware.cache.allocator import give_back
from middleware.conversations.cleaning import Cleaned
from middleware.conversations.front import Conversations
from middleware.conversations.joining import Lobby
from middleware.conversations.keys import named_session
from middleware.conversations.sessions import SessionPool
from middleware.errors import MiddlewareError
from middleware.formats.declarations import ErrorKind, Provider
from middleware.formats.routes import Routed, providers, proxy_route
from middleware.ledger import Caller, Ledger
from middleware.ledger.callers import TAGS_HEADER, caller_of, tags_of
from middleware.plugin.host import PluginHost
from middleware.policy.secrets import redact_urls
from middleware.policy.settings import bind
from middleware.policy.source import PolicySource
from middleware.proxy.admission import ByteGate, NotAdmitted
from middleware.proxy.clients import allowed
from middleware.proxy.console.book import ConsoleBook, ConsoleSettings, Note, agent_of
from middleware.proxy.console.pages import console_routes
from middleware.proxy.errors import error_body
from middleware.proxy.exchange import Exchange
from middleware.proxy.metrics import Metrics
from middleware.proxy.observe import Observer, Projection
from middleware.proxy.origin import OwnOrigin, declares_json, request_path
from middleware.proxy.policies import PolicyCatalog, status_fields
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
from middleware.records.queries import DIMENSIONS, Filters
from middleware.spill import SpillError, SpillSettings, SpillTimeout, open_root
from middleware.spill.layout import session_folder_name
from middleware.spill.recall import RecallError, lines_of
from middleware.spill.retention import forget

logger = logging.getLogger(__name__)

#: Seconds a read of the records (``/sessions``, the console) waits for the database.
READ_SECONDS = 10.0
#: Sessions ``/sessions`` lists at most.
MAX_SESSIONS_LISTED = 10_000
T = TypeVar("T")

#: The header the console's page sends with its own reads of ``/recall`` (not counted).
CONSOLE_HEADER = "x-chatcli-console"
#: The answer header naming the session a cleaned request was filed under.
SESSION_ANSWER_HEADER = "x-chatcli-session"
#: Memory a request takes while it is cleaned, for each byte of its body (measured: five
#: to six times the body at its peak).
TRANSIENT_BYTES_PER_BYTE = 4


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
        return bind(self.catalog.default.policy, ProxySettings)

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
            cleaned, projection = self._observe(body, route, lowered, source, caller)
        elif route is not None:
            settings = self.settings
            self.cleaning.limit = settings.cleaning_bytes  # as reloaded
            self.cleaning.line_limit = settings.waiting_bytes
            try:
                async with self.cleaning.admitted(len(body), settings.cleaning_wait_seconds):
                    cleaned, note, late = await anyio.to_thread.run_sync(
                        self._clean, body, route, lowered, source, caller
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
            who=_who(lowered, caller, cleaned, route.codec.name if route is not None else None,
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

    def _observe(
        self,
        raw: bytes,
        route: Routed,
        headers: Mapping[str, str],
        source: PolicySource,
        caller: str | None,
    ) -> tuple[Cleaned, Projection]:
        """Observe mode: ``raw`` goes as it came, and the pipeline runs on it beside the
        request (:mod:`.observe`). The request is filed under the session it names until
        its projection finds its conversation."""
        settings = self.settings

        def project() -> tuple[Cleaned, Caller]:
            cleaned, note, _ = self._clean(raw, route, headers, source, caller, observed=True)
            return cleaned, _who(headers, caller, cleaned, route.codec.name, note)

        projection = self.observer.submit(
            len(raw), project, seconds=settings.observe_seconds, max_bytes=settings.observe_bytes
        )
        return Cleaned(raw, named_session(headers, {}), observed=True), projection

    def _clean(  # noqa: PLR0917 (one request's parts)
        self,
        raw: bytes,
        route: Routed,
        headers: Mapping[str, str],
        source: PolicySource,
        caller: str | None,
        observed: bool = False,
    ) -> tuple[Cleaned, Note | None, Callable[[Cleaned], Caller]]:
        """Run the pipeline on one request body (in a worker thread; a route only billed
        goes as it came), count what it did, and record what the console shows of it
        (``caller``: the digest of its API key); with what records it and says who asked
        once it is filed, for a request that waits for its conversation (its record is
        made then, and a request of a conversation files what waited for it first).
        ``observed``: the request goes as it came (observe mode), and what the steps made
        of it is what they would have sent."""
        fmt = route.codec.name
        self.conversations.follow(self.catalog.default.policy)  # as reloaded
        now = self.ledger.clock()
        notes: list[Note | None] = [None]

        def noting(cleaned: Cleaned) -> Note | None:  # (finding the texts the model saw
            if self.console is None:  # may parse it)
                return None
            shown = replace(cleaned, observed=True) if observed else cleaned
            return self.console.note(shown, route=fmt, user_agent=headers.get("user-agent", ""),
                                     now=now, caller=caller)  # fmt: skip

        def noted(cleaned: Cleaned) -> None:
            if observed:  # nothing waits: a projection is filed as it is found
                notes[0] = noting(cleaned)
                return
            if cleaned.part is not None and cleaned.session is not None and not cleaned.waits:
                self.lobby.claim(cleaned.session, cleaned.part, caller)
            notes[0] = None if cleaned.waits else noting(cleaned)

        def late(cleaned: Cleaned) -> Caller:
            return _who(headers, caller, cleaned, fmt, noting(cleaned))

        cleaned = self.conversations.request(
            raw, route.codec, headers, (source.key, source.policy), now=now, noted=noted,
            cleaned=route.cleaned,
        )  # fmt: skip
        note = notes[0]
        if observed:  # what went upstream is the body as it came
            cleaned = replace(cleaned, body=raw, observed=True)
        # What the request took while it was cleaned (the body parsed, the messages' exact
        # copies, the body written) is freed once it is answered: the allocator is asked to
        # give it back then, when that adds up to enough.
        give_back(TRANSIENT_BYTES_PER_BYTE * len(raw))
        if cleaned.untouched is not None:
            self.metrics.passthrough.labels(cleaned.untouched).inc()
        if cleaned.error is not None:
            self.metrics.failures.labels(type(cleaned.error).__name__).inc()
        if cleaned.report is not None:
            self.metrics.process_seconds.observe(cleaned.seconds)
            if not observed:  # what the steps did, not what they would have done
                self.metrics.record_report(cleaned.report)
        if cleaned.continued:
            self.metrics.continued.inc()
        self.metrics.record_readbacks(cleaned.readbacks)
        if cleaned.readback_error is not None:
            self.metrics.readback_errors.inc()
        return cleaned, note, late

    def _answer(
        self, route: str, provider: Provider, status: int, kind: ErrorKind, message: str
    ) -> Response:
        self.metrics.requests.labels(route, str(status)).inc()
        return Response(error_body(provider, kind, message), status, media_type="application/json")

    # -- the proxy's own routes ----------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        if not self._may_see_status(request):
            return _forbidden("the proxy's status", "proxy.status_token")
        statuses = self.catalog.statuses()
        store = open_root(bind(self.catalog.default.policy, SpillSettings))
        trouble = store.trouble  # an object store that failed, or hung, lately
        records = self.conversations.records.health()  # never waits for the database
        healthy = (
            all(s.last_reload_ok for s in statuses.values())
            and trouble is None
            and records["reachable"]
        )
        return JSONResponse(
            {
                "status": "ok" if healthy else "degraded",
                "spill": {"url": redact_urls(store.url), "error": trouble},
                "records": records,
                "sessions": len(self.conversations.pool),
                "policies": {name: status_fields(s) for name, s in statuses.items()},
            }
        )

    async def metrics_text(self, request: Request) -> Response:
        if not self._may_see_status(request):
            return _forbidden("the proxy's metrics", "proxy.status_token")
        return Response(self.metrics.exposition(), media_type="text/plain; version=0.0.4")

    async def recall(self, request: Request) -> Response:
        """A spilled output of a session, from the proxy's store (a local folder, or the
        object store every replica shares), for clients on loopback or with the recall
        token. ``?offset=N&limit=N`` count lines as ``chatcli-mw recall`` does. Each call
        but the console's own is counted, by the step that spilled the output."""
        if not self._may_recall(request):
            return _forbidden("recall")
        session = request.path_params["session"]
        name = request.path_params["file"]
        answer = await self._recalled(request, session, name)
        if CONSOLE_HEADER not in request.headers:
            step = self.sessions.spilled_by(session, name) or "unknown"
            self.metrics.recalls.labels(step, str(answer.status_code)).inc()
        return answer

    async def _recalled(self, request: Request, session: str, name: str) -> Response:
        """What ``GET /recall/{session}/{name}`` answers."""
        try:
            offset = int(request.query_params.get("offset", "1"))
            limit = _optional_int(request.query_params.get("limit"))
        except ValueError:
            return PlainTextResponse("offset and limit are line counts (whole numbers)", 400)
        root = open_root(bind(self.catalog.default.policy, SpillSettings))
        try:
            text = await anyio.to_thread.run_sync(root.read, session_folder_name(session), name)
        except SpillError as exc:  # missed its deadline: 504; failed, or still down: 502
            logger.error("recall: %s", exc)
            status = 504 if isinstance(exc, SpillTimeout) else 502
            return PlainTextResponse(f"the spill store cannot be read: {exc}", status)
        if text is None:
            return PlainTextResponse(f"no spilled output {name!r} in session {session!r}", 404)
        try:
            lines = lines_of(text, f"{session}/{name}", offset, limit)
        except RecallError as exc:
            return PlainTextResponse(str(exc), 416)
        media = "application/json" if name.endswith(".json") else "text/plain; charset=utf-8"
        headers = {"x-chatcli-lines": f"{lines.first}-{lines.last}/{lines.total}"}
        return Response(
            lines.text.encode("utf-8", "surrogatepass"), media_type=media, headers=headers
        )

    async def session_ledger(self, request: Request) -> Response:
        """What a session was billed and would have cost unprocessed (every replica's
        answers), for clients on loopback or with the recall token."""
        if not self._may_recall(request):
            return _forbidden("a session's ledger")
        session = request.path_params["session"]
        found = await self._read(self.ledger.session, session)
        if isinstance(found, Response):
            return found
        if found is None:
            return JSONResponse({"session": session, "error": "no answer of this session "
                                 "was billed through this proxy"}, 404)  # fmt: skip
        return JSONResponse(found)

    async def ledger_total(self, request: Request) -> Response:
        """Every session's bill together, and the sessions billed most recently first
        (``?limit=N``, 100 unless given, within 0 and :data:`MAX_SESSIONS_LISTED`); with
        ``key`` (a caller's digest), ``tag`` (``name=value``, repeatable), ``agent`` or
        ``model``, the sums of the answers they select; with ``by`` (one of
        :data:`~middleware.records.queries.DIMENSIONS`), the sums by it instead of the
        sessions."""
        if not self._may_recall(request):
            return _forbidden("the ledger")
        query = request.query_params
        try:
            limit = min(max(int(query.get("limit", "100")), 0), MAX_SESSIONS_LISTED)
        except ValueError:
            return PlainTextResponse("limit is a number of sessions (a whole number)", 400)
        try:
            filters = Filters.of(query.get("key"), query.getlist("tag"), query.get("agent"),
                                 query.get("model"))  # fmt: skip
        except ValueError as exc:
            return PlainTextResponse(str(exc), 400)
        by = query.get("by")
        if by is not None and by not in DIMENSIONS:
            return PlainTextResponse(f"by is one of {', '.join(DIMENSIONS)}, not {by!r}", 400)

        def read() -> dict[str, Any]:
            total = self.ledger.total(filters)
            if by is not None:
                return {"total": total, "by": by, "groups": self.ledger.by(by, filters)[:limit]}
            return {"total": total, "sessions": self.ledger.recent(limit, filters)}

        found = await self._read(read)
        return found if isinstance(found, Response) else JSONResponse(found)

    async def _read(self, read: Callable[..., T], *args: Any) -> T | Response:
        """``read(*args)`` of the records in a worker thread, within
        :data:`READ_SECONDS`; a 503 saying why if the database does not answer (a hung
        one keeps that thread, never the event loop)."""
        try:
            with anyio.fail_after(READ_SECONDS):
                return await anyio.to_thread.run_sync(partial(read, *args), abandon_on_cancel=True)
        except TimeoutError:
            said = f"did not answer within {READ_SECONDS:g} s"
        except sa.exc.SQLAlchemyError as exc:
            said = f"failed: {str(getattr(exc, 'orig', None) or exc).strip().splitlines()[0]}"
        where = self.conversations.records.where
        logger.error("the records database %s %s", where, said)
        return PlainTextResponse(f"the records database {where} {said}; what the proxy "
                                 "records waits for it (/healthz says more)", 503)  # fmt: skip

    async def end_session(self, request: Request) -> Response:
        """The client says a session has ended: release its state on this replica and
        remove its spilled outputs from the store (every replica's, when it is shared)."""
        if not self._may_recall(request):
            return _forbidden("ending a session")
        session = request.path_params["session"]
        released = await anyio.to_thread.run_sync(self.conversations.end, session)
        root = open_root(bind(self.catalog.default.policy, SpillSettings))
        try:
            removed = await anyio.to_thread.run_sync(forget, root, session)
        except SpillError as exc:
            logger.error("cannot remove the spilled outputs of session %r: %s", session, exc)
            return JSONResponse({"session": session, "error": str(exc)}, 502)
        logger.info("session %r ended: %d pipelines released, outputs removed: %s",
                    session, released, removed)  # fmt: skip
        return JSONResponse({"session": session, "released": released, "removed": removed})

    def _may_recall(self, request: Request) -> bool:
        settings = self.settings
        return allowed(request, settings.recall_token, settings.trusted_networks)

    def _may_see_status(self, request: Request) -> bool:
        """``/healthz`` and ``/metrics``: open to all unless ``proxy.status_token`` is set,
        then to clients on loopback and those that send it."""
        settings = self.settings
        token = settings.status_token
        return token is None or allowed(request, token, settings.trusted_networks)

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
            Route("/healthz", proxy.healthz, methods=["GET"]),
            Route("/metrics", proxy.metrics_text, methods=["GET"]),
            Route("/recall/{session:path}/{file}", proxy.recall, methods=["GET"]),
            Route("/sessions", proxy.ledger_total, methods=["GET"]),
            Route("/sessions/{session:path}", proxy.session_ledger, methods=["GET"]),
            Route("/sessions/{session:path}", proxy.end_session, methods=["DELETE"]),
            *console_routes(proxy, proxy._may_recall, proxy._read),
            Route("/{path:path}", proxy.forward, methods=methods),
        ],
        middleware=[Middleware(OwnOrigin, policy=lambda: proxy.catalog.default.policy)],
        lifespan=lifespan,
    )


def _who(
    headers: Mapping[str, str],
    caller: str | None,
    cleaned: Cleaned,
    fmt: str | None,
    note: Note | None,
) -> Caller:
    """Who asked (``caller``: a digest of the API key), the request's ``x-chatcli-tags``,
    the agent its session is told to be and the console's record of it, for the ledger
    (``headers``: the request's, with lower-case names)."""
    key = cleaned.session
    agent = None if key is None else agent_of(key.source, fmt, headers.get("user-agent", ""))
    return Caller(
        caller=caller,
        tags=tags_of(headers.get(TAGS_HEADER)),
        agent=agent,
        request=None if note is None else note.key,
    )


def _forbidden(what: str, key: str = "proxy.recall_token") -> Response:
    return PlainTextResponse(
        f"{what} is open to clients on this machine, or with the token set in "
        f"{key} (Authorization: Bearer <token>)",
        403,
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


def _optional_int(value: str | None) -> int | None:
    return None if value is None else int(value)


def _provider_of(
    headers: Mapping[str, str], query: Mapping[str, str], settings: ProxySettings
) -> Provider:
    """Who a request not on a cleaned route is for: the first provider that claims its
    headers or query (Anthropic's version or key header, or Claude Code; OpenAI's bearer
    token; Google's key), else the one ``proxy.other_requests`` names."""
    claimed = next((p for p in providers() if p.claims(headers, query)), None)
    return claimed if claimed is not None else settings.other_provider
