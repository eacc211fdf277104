"""The console's routes: the page at ``/ui`` (static files shipped in this package) and the
JSON it polls: the sessions and their requests read from the records database every
replica shares (:mod:`.paging`, in a worker thread: a database that does not answer gets
a 503, never a hung proxy), and the proxy's own state (the metrics, the session pool, the
policies, the admission gate). A spilled output's full text is read on demand through
``/recall/{session}/{file}``, which the proxy serves already."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from importlib import resources
from typing import Any, Protocol, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from middleware.conversations.sessions import SessionPool, SessionSettings
from middleware.formats.routes import providers
from middleware.ledger import Ledger
from middleware.policy import Policy
from middleware.policy.secrets import redact_urls, shown
from middleware.policy.settings import bind
from middleware.proxy.admission import ByteGate
from middleware.proxy.console.book import ConsoleBook
from middleware.proxy.console.paging import MAX_BILLS, Asked, session_page, sessions_list
from middleware.proxy.metrics import Metrics
from middleware.proxy.policies import PolicyCatalog, status_fields
from middleware.proxy.settings import ProxySettings
from middleware.records import Records
from middleware.records.queries import Filters
from middleware.records.store import MEMORY
from middleware.spill import SpillSettings, open_root

T = TypeVar("T")

#: The console's static files and their media types (nothing else is served from there).
STATIC = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
#: Sessions listed at most unless the page asks for fewer.
MAX_LISTED = 1000
#: A session's requests sent at once unless the page asks for another number, and at most.
PAGE = 25
MAX_PAGE = 100
_NO_STORE = {"cache-control": "no-store"}


class Served(Protocol):
    """What the console reads of the proxy (:class:`middleware.proxy.app.Proxy`)."""

    catalog: PolicyCatalog
    metrics: Metrics
    cleaning: ByteGate
    console: ConsoleBook | None

    @property
    def sessions(self) -> SessionPool: ...

    @property
    def ledger(self) -> Ledger: ...

    @property
    def records(self) -> Records: ...

    @property
    def settings(self) -> ProxySettings: ...


class Reader(Protocol):
    """Runs a read of the records in a worker thread, within a time bound: its result, or
    the answer to give if the database does not answer (``Proxy._read``)."""

    def __call__(self, read: Callable[..., T], *args: Any) -> Awaitable[T | Response]: ...


def console_routes(proxy: Served, allowed: Callable[[Request], bool], read: Reader) -> list[Route]:
    """The console's routes, each open to the clients ``allowed`` lets in (the rule of
    ``/sessions``), reading the records through ``read``."""
    # What tells one database's seqs from another's: a page that sees it change starts
    # again. A database in memory is this process's; any other outlives it.
    epoch = uuid.uuid4().hex[:12] if proxy.records.where == MEMORY else "kept"

    def guarded(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            if not allowed(request):
                return PlainTextResponse(
                    "the console is open to clients on this machine, or with the token set "
                    "in proxy.recall_token (Authorization: Bearer <token>)",
                    403,
                )
            return await handler(request)

        return endpoint

    async def index(request: Request) -> Response:
        return _static("index.html")

    async def static(request: Request) -> Response:
        return _static(request.path_params["name"])

    async def sessions(request: Request) -> Response:
        query = request.query_params
        try:
            limit = _limit(query, MAX_LISTED, MAX_LISTED)
        except ValueError:
            return PlainTextResponse("limit is a number of sessions (a whole number)", 400)
        try:
            filters = Filters.asked(query)
        except ValueError as exc:
            return PlainTextResponse(str(exc), 400)
        found = await read(sessions_page, proxy, limit, filters)
        return found if isinstance(found, Response) else JSONResponse(found, headers=_NO_STORE)

    async def session(request: Request) -> Response:
        query = request.query_params
        try:
            limit = _limit(query, PAGE, MAX_PAGE)
            before, after = (_whole(query.get(name)) for name in ("before", "after"))
            bills = tuple(int(seq) for seq in query.get("bills", "").split(",") if seq)
        except ValueError:
            return PlainTextResponse(
                "limit is a number of requests; before and after are a request's seq; bills "
                "is a list of seqs, by commas (whole numbers, each)",
                400,
            )
        if before is not None and after is not None:
            return PlainTextResponse("ask with one of before or after at most", 400)
        asked = Asked(limit, before, after, bills[:MAX_BILLS])
        found = await read(
            lambda: session_page(proxy.records.store(), request.path_params["session"],
                                 asked, epoch)
        )  # fmt: skip
        if isinstance(found, Response):
            return found
        if found is None:
            return JSONResponse({"error": "the proxy has no record of this session"}, 404)
        return Response(found, media_type="application/json", headers=_NO_STORE)

    async def state(request: Request) -> Response:
        return JSONResponse(proxy_page(proxy), headers=_NO_STORE)

    return [
        Route("/ui", lambda request: RedirectResponse("/ui/", 307), methods=["GET"]),
        Route("/ui/", guarded(index), methods=["GET"]),
        Route("/ui/static/{name}", guarded(static), methods=["GET"]),
        Route("/ui/api/sessions", guarded(sessions), methods=["GET"]),
        Route("/ui/api/sessions/{session:path}", guarded(session), methods=["GET"]),
        Route("/ui/api/proxy", guarded(state), methods=["GET"]),
    ]


def _limit(query: Mapping[str, str], default: int, most: int) -> int:
    """The ``limit`` asked for, within 1 and ``most`` (``ValueError``: not a number)."""
    asked = _whole(query.get("limit"))
    return default if asked is None else min(max(asked, 1), most)


def _whole(text: str | None) -> int | None:
    """A whole number given in a query (``None``: not given; ``ValueError``: not one)."""
    return None if text is None else int(text)


def _static(name: str) -> Response:
    media = STATIC.get(name)
    if media is None:
        return PlainTextResponse(f"the console has no file {name!r}", 404)
    data = resources.files(__package__).joinpath("static").joinpath(name).read_bytes()
    return Response(data, media_type=media, headers=_NO_STORE)


# -- the pages' data ---------------------------------------------------------------------


def sessions_page(
    proxy: Served, limit: int = MAX_LISTED, filters: Filters = Filters()
) -> dict[str, Any]:
    """The sessions seen most recently first, every replica's: the agent and counts of the
    console beside the bill of the ledger, and the ledger's total (reads the records);
    with ``filters`` (a caller's key digest, tags, an agent, a model), the sessions of the
    answers they select, each session's bill and the total over those answers only."""
    page = {
        "console": proxy.console is not None,
        "filters": _filters_shown(filters),
        "total": proxy.ledger.total(filters),
        "sessions": sessions_list(proxy.records.store(), limit, filters),
    }
    return {"version": _version(page), **page}


def _filters_shown(filters: Filters) -> dict[str, Any]:
    return {
        "key": filters.caller,
        "tags": [f"{name}={value}" for name, value in filters.tags],
        "agent": filters.agent,
        "model": filters.model,
    }


def proxy_page(proxy: Served) -> dict[str, Any]:
    """The policy in effect and its last reload, the upstreams, the requests passed
    through by reason, and the memory budgets with how full they are."""
    policy = proxy.catalog.default.policy
    settings = proxy.settings
    statuses = proxy.catalog.statuses()
    store = open_root(bind(policy, SpillSettings))
    book = proxy.console
    page = {
        "policy": {
            "name": policy.name,
            "source": policy.source,
            "files": list(policy.files),
            "set": _set_keys(policy),
        },
        "policies": {
            name: {
                **status_fields(s),
                "last_success_at": s.last_success_at or None,
                "plugin_problems": [
                    f"{x.plugin} in {x.hook}: {x.message}" for x in s.plugin_problems
                ],
            }
            for name, s in statuses.items()
        },
        "upstreams": {p.name: redact_urls(settings.upstream(p)) for p in providers()},
        "other_requests": settings.other_requests,
        "spill": {"url": redact_urls(store.url), "error": store.trouble},
        "passthrough": _counts(proxy.metrics, "chatcli_proxy_passthrough", "reason"),
        "failures": _counts(proxy.metrics, "chatcli_proxy_failures", "error"),
        "memory": _budgets(proxy, policy, settings),
        "sessions": len(proxy.sessions),
        "evictions": proxy.sessions.evictions,
        "console_forgotten": book.forgotten if book is not None else 0,
        "records": proxy.records.health(),
    }
    return {"version": _version(page), **page}


def _budgets(proxy: Served, policy: Policy, settings: ProxySettings) -> list[dict[str, Any]]:
    """Each memory budget: what it holds now, its limit and how full it is."""
    book = proxy.console
    cache = proxy.sessions.cache
    stats = cache.stats() if cache is not None else None
    sessions = bind(policy, SessionSettings).memory_bytes
    return [
        _budget("session state (proxy.session_memory_bytes)", proxy.sessions.held_bytes, sessions),
        _budget(
            "of which the console (the actions it has shown, by session)",
            book.held_bytes if book is not None else 0,
            None,
        ),
        _budget(
            "cache of reused work (cache.max_bytes)",
            stats.bytes if stats else 0,
            stats.max_bytes if stats else None,
        ),
        _budget(
            "bodies being cleaned (proxy.cleaning_bytes)",
            proxy.cleaning.held,
            settings.cleaning_bytes,
        ),
        _budget(
            "bodies waiting to be cleaned (proxy.waiting_bytes)",
            proxy.cleaning.waiting,
            settings.waiting_bytes,
        ),
    ]


def _version(page: Mapping[str, Any]) -> str:
    """What changes whenever anything ``page`` shows does (the page redraws when it does)."""
    text = json.dumps(page, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _set_keys(policy: Policy) -> list[dict[str, Any]]:
    """The keys the policy sets away from their defaults: value (credentials hidden) and
    where it was set."""
    out = []
    for key, origin in sorted(policy.origins.items()):
        if origin.startswith("default"):
            continue
        out.append({"key": key, "value": shown(key, policy.get(key)), "origin": origin})
    return out


def _counts(metrics: Metrics, name: str, label: str) -> dict[str, float]:
    """A labelled counter's totals, by label value."""
    counts: dict[str, float] = {}
    for family in metrics.registry.collect():
        if family.name != name:
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                counts[sample.labels[label]] = sample.value
    return counts


def _budget(name: str, used: int, limit: int | None) -> dict[str, Any]:
    full = round(used / limit, 4) if limit else None
    return {"name": name, "bytes": used, "limit": limit, "full": full}
