"""The console's routes: the page at ``/ui`` (static files shipped in this package) and the
JSON it polls, read from what the proxy already holds: the ledger, the console's book,
the metrics, the session pool, the policies and the admission gate. A spilled output's
full text is read on demand through ``/recall/{session}/{file}``, which the proxy serves
already."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any, Protocol

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
from middleware.proxy.console.paging import Asked
from middleware.proxy.metrics import Metrics
from middleware.proxy.policies import PolicyCatalog, status_fields
from middleware.proxy.settings import ProxySettings
from middleware.spill import SpillSettings, open_root

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
    def settings(self) -> ProxySettings: ...


def console_routes(proxy: Served, allowed: Callable[[Request], bool]) -> list[Route]:
    """The console's routes, each open to the clients ``allowed`` lets in (the rule of
    ``/sessions``)."""

    def guarded(
        handler: Callable[[Request], Response],
    ) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            if not allowed(request):
                return PlainTextResponse(
                    "the console is open to clients on this machine, or with the token set "
                    "in proxy.recall_token (Authorization: Bearer <token>)",
                    403,
                )
            return handler(request)

        return endpoint

    def index(request: Request) -> Response:
        return _static("index.html")

    def static(request: Request) -> Response:
        return _static(request.path_params["name"])

    def sessions(request: Request) -> Response:
        try:
            limit = _limit(request.query_params, MAX_LISTED, MAX_LISTED)
        except ValueError:
            return PlainTextResponse("limit is a number of sessions (a whole number)", 400)
        return JSONResponse(sessions_page(proxy, limit), headers=_NO_STORE)

    def session(request: Request) -> Response:
        query = request.query_params
        try:
            limit = _limit(query, PAGE, MAX_PAGE)
            before, after, since = (
                _whole(query.get(name)) for name in ("before", "after", "since")
            )
        except ValueError:
            return PlainTextResponse(
                "limit is a number of requests; before and after are request numbers; since "
                "is the 'since' of an earlier answer (whole numbers, each)",
                400,
            )
        if sum(cursor is not None for cursor in (before, after, since)) > 1:
            return PlainTextResponse("ask with one of before, after or since at most", 400)
        # The running cost comes with the latest requests, and with what changed since.
        asked = Asked(limit, before, after, since, costs=before is None and after is None)
        found = session_page(proxy, request.path_params["session"], asked)
        if found is None:
            return JSONResponse({"error": "the proxy has no record of this session"}, 404)
        return Response(found, media_type="application/json", headers=_NO_STORE)

    def state(request: Request) -> Response:
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


def sessions_page(proxy: Served, limit: int = MAX_LISTED) -> dict[str, Any]:
    """Every session the ledger or the console knows, most recently seen first: its agent
    and counts (the console's) beside its bill (the ledger's)."""
    book = proxy.console
    seen = book.summaries() if book is not None else {}
    bills = {row["session"]: row for row in proxy.ledger.recent(limit)}
    rows = []
    for name in {*seen, *bills}:
        rows.append(_row(seen.get(name), bills.get(name), name))
    rows.sort(key=lambda row: row["last"] or 0, reverse=True)
    return {
        "version": _version(proxy),
        "console": book is not None,
        "total": proxy.ledger.total(),
        "sessions": rows[:limit],
    }


def _row(
    seen: Mapping[str, Any] | None, bill: Mapping[str, Any] | None, name: str
) -> dict[str, Any]:
    lasts = [t for t in ((seen or {}).get("last"), (bill or {}).get("last")) if t is not None]
    return {
        "session": name,
        "agent": seen["agent"] if seen else None,
        "source": seen["source"] if seen else None,
        "format": seen["format"] if seen else None,
        "requests": seen["requests"] if seen else bill["requests"] if bill else 0,
        "repairs": seen["repairs"] if seen else None,
        "spills": seen["spills"] if seen else None,
        "compactions": seen["compactions"] if seen else None,
        "billed": bill["billed"] if bill else None,
        "without": bill["without"] if bill else None,
        "saved_dollars": bill["saved_dollars"] if bill else None,
        "unpriced": bill["unpriced"] if bill else 0,
        "last": max(lasts, default=None),
    }


def session_page(proxy: Served, session: str, asked: Asked) -> bytes | None:
    """One session's counts and bill, and the requests ``asked`` of those the console kept,
    as JSON (``None``: neither the console nor the ledger knows it)."""
    book = proxy.console
    found = book.requests(session, asked) if book is not None else None
    bill = proxy.ledger.session(session)
    if found is None and bill is None:
        return None
    head: dict[str, Any] = {
        "version": _version(proxy),
        "epoch": book.epoch if book is not None else None,
        "since": found.version if found is not None else (book.version if book else 0),
        "row": _row(found.summary if found else None, bill, session),
        "ledger": bill,
        "forgotten": found.summary["forgotten"] if found else 0,
        "kept": found.kept if found else 0,
        "first": found.first if found else None,
        "last": found.last if found else None,
        "older": found.older if found else False,
        "more": found.more if found else False,
    }
    if found is not None and found.costs is not None:
        head["costs"] = found.costs
    text = json.dumps(head, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    records = found.records if found is not None else b"[]"
    return text[:-1] + b',"requests":' + records + b"}"


def proxy_page(proxy: Served) -> dict[str, Any]:
    """The policy in effect and its last reload, the upstreams, the requests passed
    through by reason, and the memory budgets with how full they are."""
    policy = proxy.catalog.default.policy
    settings = proxy.settings
    statuses = proxy.catalog.statuses()
    store = open_root(bind(policy, SpillSettings))
    book = proxy.console
    return {
        "version": _version(proxy),
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
        "console_shed": book.shed_records if book is not None else 0,
    }


def _budgets(proxy: Served, policy: Policy, settings: ProxySettings) -> list[dict[str, Any]]:
    """Each memory budget: what it holds now, its limit and how full it is."""
    book = proxy.console
    cache = proxy.sessions.cache
    stats = cache.stats() if cache is not None else None
    sessions = bind(policy, SessionSettings).memory_bytes
    return [
        _budget("session state (proxy.session_memory_bytes)", proxy.sessions.held_bytes, sessions),
        _budget(
            "of which the console (proxy.console.request_bytes a request)",
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


def _version(proxy: Served) -> str:
    """What changes whenever anything the pages show does (they poll it)."""
    book = proxy.console
    total = proxy.ledger.total()
    return f"{book.version if book is not None else 0}.{total['requests']}"


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
