"""The proxy's own routes, beside the forwarding path: ``GET /healthz`` and ``/metrics``
(open unless ``proxy.status_token`` is set), ``GET /recall/{session}/{file}``, the ledger
(``GET /sessions``, ``GET /sessions/{session}``) and ``DELETE /sessions/{session}`` (for
clients on loopback, the trusted networks, or with ``proxy.recall_token``).

Each reads the records in a worker thread within :data:`READ_SECONDS`, so a database that
does not answer costs a 503, never the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import anyio.to_thread
import sqlalchemy as sa
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from middleware.conversations.front import Conversations
from middleware.ledger import Ledger
from middleware.policy.secrets import redact_urls
from middleware.policy.settings import bind
from middleware.proxy.clients import allowed
from middleware.proxy.metrics import Metrics
from middleware.proxy.policies import PolicyCatalog, status_fields
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


@dataclass
class OwnRoutes:
    """The proxy's own routes, over its policies, conversations and metrics."""

    catalog: PolicyCatalog
    conversations: Conversations
    metrics: Metrics

    @property
    def ledger(self) -> Ledger:
        """What the answers' usage says was billed, per session and in total."""
        return self.conversations.ledger

    async def healthz(self, request: Request) -> Response:
        if not self.may_see_status(request):
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
        if not self.may_see_status(request):
            return _forbidden("the proxy's metrics", "proxy.status_token")
        return Response(self.metrics.exposition(), media_type="text/plain; version=0.0.4")

    async def recall(self, request: Request) -> Response:
        """A spilled output of a session, from the proxy's store (a local folder, or the
        object store every replica shares), for clients on loopback or with the recall
        token. ``?offset=N&limit=N`` count lines as ``chatcli-mw recall`` does. Each call
        but the console's own is counted, by the step that spilled the output."""
        if not self.may_recall(request):
            return _forbidden("recall")
        session = request.path_params["session"]
        name = request.path_params["file"]
        answer = await self._recalled(request, session, name)
        if CONSOLE_HEADER not in request.headers:
            step = self.conversations.pool.spilled_by(session, name) or "unknown"
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
        if not self.may_recall(request):
            return _forbidden("a session's ledger")
        session = request.path_params["session"]
        found = await self.read(self.ledger.session, session)
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
        if not self.may_recall(request):
            return _forbidden("the ledger")
        query = request.query_params
        try:
            limit = min(max(int(query.get("limit", "100")), 0), MAX_SESSIONS_LISTED)
        except ValueError:
            return PlainTextResponse("limit is a number of sessions (a whole number)", 400)
        try:
            filters = Filters.asked(query)
        except ValueError as exc:
            return PlainTextResponse(str(exc), 400)
        by = query.get("by")
        if by is not None and by not in DIMENSIONS:
            return PlainTextResponse(f"by is one of {', '.join(DIMENSIONS)}, not {by!r}", 400)

        def read() -> dict[str, Any]:
            total = self.ledger.total(filters)
            if by is not None:
                return {
                    "total": total,
                    "by": by,
                    "groups": self.ledger.by(by, filters)[:limit],
                }
            return {"total": total, "sessions": self.ledger.recent(limit, filters)}

        found = await self.read(read)
        return found if isinstance(found, Response) else JSONResponse(found)

    async def read(self, read: Callable[..., T], *args: Any) -> T | Response:
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
        if not self.may_recall(request):
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

    def may_recall(self, request: Request) -> bool:
        settings = self.catalog.settings
        return allowed(request, settings.recall_token, settings.trusted_networks)

    def may_see_status(self, request: Request) -> bool:
        """``/healthz`` and ``/metrics``: open to all unless ``proxy.status_token`` is set,
        then to clients on loopback and those that send it."""
        settings = self.catalog.settings
        token = settings.status_token
        return token is None or allowed(request, token, settings.trusted_networks)


def _forbidden(what: str, key: str = "proxy.recall_token") -> Response:
    return PlainTextResponse(
        f"{what} is open to clients on this machine, or with the token set in "
        f"{key} (Authorization: Bearer <token>)",
        403,
    )


def _optional_int(value: str | None) -> int | None:
    return None if value is None else int(value)
