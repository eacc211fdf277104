"""What the console's pages read of a session's requests: a page of them numbered in their
session, the bills of some of them, and the session's running cost (every replica's, in
the records database). Each reads an index range: the requests asked for (and the count
of those after them), their answers, the session's answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from middleware.records.queries import requests
from middleware.records.store import RecordStore
from middleware.records.tables import ANSWERS, REQUESTS, SESSIONS


@dataclass(frozen=True)
class RequestPage:
    """Some of a session's requests (:func:`request_page`) and where they stand."""

    #: Newest first, as :func:`.queries.requests` reads them, each with its number ``n``.
    requests: list[dict[str, Any]]
    #: How many of the session's requests the database keeps, and the ``seq`` of the
    #: oldest and the newest (``None``: it keeps none).
    kept: int
    first: int | None
    last: int | None
    #: How many the session had in all (its row's count: those removed since included).
    counted: int


def request_page(
    store: RecordStore,
    name: str,
    *,
    before: int | None = None,
    after: int | None = None,
    limit: int,
) -> RequestPage:
    """:func:`.queries.requests`, each numbered in its session: ``n`` counts the session's
    requests up to it, whichever replica wrote them (the session's count less those kept
    after it, so numbers stay as the oldest are removed). Reads an index range: the
    requests asked for, and those of the session after them."""
    r, s = REQUESTS, SESSIONS
    rows = requests(store, name, before=before, after=after, limit=limit)
    newest = rows[0]["seq"] if rows else None
    # In one statement, so that the count and those after the newest agree (rows
    # written since the page was read come after it: a session's seqs are in the order
    # its rows are committed, :func:`.batches.write_batch`).
    with store.connection() as connection:
        others = REQUESTS.alias("later")
        later = sa.select(sa.func.count()).where(others.c.session == name)
        counted = sa.select(s.c.requests).where(s.c.session == name).scalar_subquery()
        kept, first, last, after_newest, total = connection.execute(
            sa.select(
                sa.func.count(),
                sa.func.min(r.c.seq),
                sa.func.max(r.c.seq),
                later.where(others.c.seq > (newest or 0)).scalar_subquery(),
                counted,
            ).where(r.c.session == name)
        ).one()
    total = int(total or 0)
    for place, row in enumerate(rows):
        row["n"] = total - int(after_newest) - place
    return RequestPage(rows, int(kept), first, last, total)


def bills(store: RecordStore, name: str, seqs: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """The answers of the requests of session ``name`` numbered ``seqs``, by ``seq``,
    oldest first (a request with none is left out)."""
    r, a = REQUESTS, ANSWERS
    found: dict[int, list[dict[str, Any]]] = {}
    if not seqs:
        return found
    query = (
        sa.select(r.c.seq, a)
        .join(a, a.c.request == r.c.key)
        .where(r.c.session == name, r.c.seq.in_(list(seqs)))
        .order_by(a.c.time, a.c.key)
    )
    with store.connection() as connection:
        for row in connection.execute(query):
            values = dict(row._mapping)
            found.setdefault(values.pop("seq"), []).append(values)
    return found


def running_cost(store: RecordStore, name: str, points: int) -> list[tuple[int, float, float]]:
    """What the priced answers of session ``name`` cost in all after each, in the order
    they came: ``(k, billed, without)`` after the ``k``-th, at ``points`` of them at most,
    evenly spread, the last among them. Reads the session's answers (its index)."""
    a = ANSWERS
    priced = (
        (a.c.session == name)
        & sa.not_(a.c.unread)
        & a.c.dollars.is_not(None)
        & a.c.dollars_without.is_not(None)
    )
    order = (a.c.time, a.c.key)
    running = (
        sa.select(
            sa.func.row_number().over(order_by=order).label("k"),
            sa.func.sum(a.c.dollars).over(order_by=order, rows=(None, 0)).label("billed"),
            sa.func.sum(a.c.dollars_without).over(order_by=order, rows=(None, 0)).label("without"),
        )
        .where(priced)
        .subquery()
    )
    with store.connection() as connection:
        count = connection.execute(sa.select(sa.func.count()).where(priced)).scalar_one()
        if not count:
            return []
        stride = max(1, -(-count // max(1, points - 1)))  # ceil: points - 1, and the last
        chosen = connection.execute(
            sa.select(running)
            .where(((running.c.k - 1) % stride == 0) | (running.c.k == count))
            .order_by(running.c.k)
        )
        return [(int(k), float(billed), float(without)) for k, billed, without in chosen]
