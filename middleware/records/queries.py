"""What the pages and the ``ledger`` command read of the records: a session's sums, the
sessions seen most recently (with filters on who called and with which tags), the totals,
sums by a dimension, and a session's requests a page at a time.

Every query is answered by an index (see :mod:`.tables`): a session's row by its key, the
sessions by their last time, a session's requests by ``(session, seq)``, the answers of a
caller or a tag by theirs. Sums over answers (a filter, ``--by``) scan only the answers
the filter selects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import sqlalchemy as sa

from middleware.records.store import RecordStore
from middleware.records.tables import (
    ANSWER_TAGS,
    ANSWERS,
    DAYS,
    REQUESTS,
    SESSION_MODELS,
    SESSIONS,
    SUMS,
    TOKEN_KINDS,
)

#: What the sums may be by (``/sessions?by=``, ``chatcli-mw ledger --by``): the caller
#: (``key``, a digest of its API key), a tag's ``name=value``, or a column.
DIMENSIONS = ("key", "tag", "agent", "model", "day", "replica")


class Query(Protocol):
    """A query string as Starlette's ``QueryParams`` gives it."""

    def get(self, key: str, /) -> str | None: ...

    def getlist(self, key: Any, /) -> list[Any]: ...


@dataclass(frozen=True)
class Filters:
    """Which answers a sum counts: of one caller (the digest of its API key), with every
    tag given (``name=value``), of an agent or a model."""

    caller: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    agent: str | None = None
    model: str | None = None

    def __bool__(self) -> bool:
        return bool(self.caller or self.tags or self.agent or self.model)

    @classmethod
    def of(
        cls,
        key: str | None = None,
        tags: Sequence[str] = (),
        agent: str | None = None,
        model: str | None = None,
    ) -> Filters:
        """Filters as a user writes them (``tags``: ``name=value`` each).

        :raises ValueError: a tag is not ``name=value``.
        """
        pairs = []
        for tag in tags:
            name, equals, value = tag.partition("=")
            if not equals or not name.strip():
                raise ValueError(f"a tag filter is name=value, not {tag!r}")
            pairs.append((name.strip(), value.strip()))
        return cls(key or None, tuple(pairs), agent or None, model or None)

    @classmethod
    def asked(cls, query: Query) -> Filters:
        """Filters as a query string gives them (``?key=&tag=&agent=&model=``); raises
        :class:`ValueError` as :meth:`of` does."""
        get = query.get
        return cls.of(get("key"), query.getlist("tag"), get("agent"), get("model"))


def session(store: RecordStore, name: str) -> dict[str, Any] | None:
    """A session's row of sums and counts, with ``models`` (answers by model)."""
    s, m = SESSIONS, SESSION_MODELS
    with store.connection() as connection:
        row = connection.execute(sa.select(s).where(s.c.session == name)).first()
        if row is None:
            return None
        models = connection.execute(
            sa.select(m.c.model, m.c.answers).where(m.c.session == name)
        ).all()
    return {**row._mapping, "models": {str(m): int(n) for m, n in models}}


def recent(
    store: RecordStore, limit: int, filters: Filters = Filters(), *, billed: bool = True
) -> list[dict[str, Any]]:
    """The sessions seen most recently first (``billed``: only those with an answer
    billed), ``limit`` at most; with ``filters``, their sums over the answers selected."""
    s = SESSIONS
    with store.connection() as connection:
        if not filters:
            query = sa.select(s).order_by(s.c.last.desc(), s.c.session).limit(limit)
            if billed:
                query = query.where(s.c.answers > 0)
            rows = [dict(row._mapping) for row in connection.execute(query)]
        else:
            rows = _filtered(connection, limit, filters)
        names = [row["session"] for row in rows]
        m = SESSION_MODELS
        models: dict[str, dict[str, int]] = {name: {} for name in names}
        if names:
            found = connection.execute(
                sa.select(m.c.session, m.c.model, m.c.answers).where(m.c.session.in_(names))
            )
            for name, model, answers in found:
                models[name][model] = answers
    return [{**row, "models": models[row["session"]]} for row in rows]


def totals(store: RecordStore, filters: Filters = Filters()) -> dict[str, Any]:
    """Every answer's sums together, and how many sessions have one."""
    with store.connection() as connection:
        if filters:
            a = ANSWERS
            joined, conditions = _selected(filters)
            query = sa.select(*_answer_sums(a)).select_from(joined).where(*conditions)
            row = dict(connection.execute(query).one()._mapping)
            count = connection.execute(
                sa.select(sa.func.count(sa.distinct(a.c.session)))
                .select_from(joined)
                .where(*conditions, a.c.session.is_not(None))
            ).scalar_one()
        else:
            d = DAYS
            row = dict(
                connection.execute(sa.select(*(sa.func.sum(d.c[n]).label(n) for n in SUMS)))
                .one()
                ._mapping
            )
            s = SESSIONS
            count = connection.execute(
                sa.select(sa.func.count()).select_from(s).where(s.c.answers > 0)
            ).scalar_one()
        # Each bound its own select: SQLite reads min() or max() from the index only when
        # a query asks for one of them (both at once scan every answer).
        time = ANSWERS.c.time
        bounds = (
            (row.get("first"), row.get("last"))
            if filters
            else connection.execute(
                sa.select(
                    sa.select(sa.func.min(time)).scalar_subquery(),
                    sa.select(sa.func.max(time)).scalar_subquery(),
                )
            ).one()
        )
    sums = {name: row[name] or 0 for name in SUMS}
    return {**sums, "sessions": count, "first": bounds[0], "last": bounds[1]}


def models(store: RecordStore) -> dict[str, int]:
    """Every answer's model and how many answers each had (the days' sums, by model)."""
    with store.connection() as connection:
        found = connection.execute(
            sa.select(DAYS.c.model, sa.func.sum(DAYS.c.answers)).group_by(DAYS.c.model)
        )
        return {str(model): int(answers) for model, answers in found if model}


def by(
    store: RecordStore, dimension: str, filters: Filters = Filters(), limit: int = 1000
) -> list[dict[str, Any]]:
    """Sums of the answers grouped by ``dimension`` (:data:`DIMENSIONS`; ``tag``: each
    ``name=value`` pair), largest bill first."""
    if dimension not in DIMENSIONS:
        raise ValueError(f"sums are by one of {', '.join(DIMENSIONS)}, not {dimension!r}")
    if not filters and dimension in ("day", "model"):
        return _by_day_or_model(store, dimension, limit)
    a = ANSWERS
    joined, conditions = _selected(filters)
    if dimension == "tag":
        tag = ANSWER_TAGS.alias("grouped")
        joined = joined.join(tag, tag.c.answer == a.c.key)
        group: Any = (tag.c.name + "=" + tag.c.value).label("group")
    else:
        group = a.c["caller" if dimension == "key" else dimension].label("group")
    query = (
        sa.select(group, *_answer_sums(a))
        .select_from(joined)
        .where(*conditions)
        .group_by(group)
        .order_by(sa.func.sum(a.c.dollars).desc().nulls_last(), group)
        .limit(limit)
    )
    with store.connection() as connection:
        return [dict(row._mapping) for row in connection.execute(query)]


def _by_day_or_model(store: RecordStore, dimension: str, limit: int) -> list[dict[str, Any]]:
    """Every answer's sums by day or by model, from the days' running sums (a row a day
    and model, however many answers: bounded at any size)."""
    d = DAYS
    group: Any = d.c.day if dimension == "day" else sa.func.nullif(d.c.model, "")
    group = group.label("group")
    query = (
        sa.select(group, *(sa.func.sum(d.c[n]).label(n) for n in SUMS))
        .group_by(group)
        .order_by(sa.func.sum(d.c.dollars).desc(), group)
        .limit(limit)
    )
    with store.connection() as connection:
        return [dict(row._mapping) for row in connection.execute(query)]


def requests(
    store: RecordStore,
    name: str,
    *,
    before: int | None = None,
    after: int | None = None,
    limit: int,
) -> list[dict[str, Any]]:
    """A session's requests, newest first: the latest, or those before ``before`` (a
    ``seq``), or the first after ``after`` (so that a page asking after the newest it
    shows gets them all, a page at a time), ``limit`` at most; each with ``seq``,
    ``time``, ``replica``, its ``record`` (JSON bytes) and the ``bills`` of its answers."""
    r, a = REQUESTS, ANSWERS
    query = sa.select(r.c.seq, r.c.key, r.c.time, r.c.replica, r.c.record).where(
        r.c.session == name
    )
    if before is not None:
        query = query.where(r.c.seq < before)
    if after is not None:
        query = query.where(r.c.seq > after).order_by(r.c.seq)
    else:
        query = query.order_by(r.c.seq.desc())
    with store.connection() as connection:
        rows = [dict(row._mapping) for row in connection.execute(query.limit(limit))]
        rows.sort(key=lambda row: -row["seq"])
        keys = [row["key"] for row in rows]
        bills: dict[str, list[dict[str, Any]]] = {key: [] for key in keys}
        if keys:
            for row in connection.execute(
                sa.select(a).where(a.c.request.in_(keys)).order_by(a.c.time, a.c.key)
            ):
                bills[row.request].append(dict(row._mapping))
    return [{**row, "bills": bills[row["key"]]} for row in rows]


def _answer_sums(a: sa.Table) -> list[sa.Label[Any]]:
    read = sa.not_(a.c.unread)
    priced = read & a.c.dollars.is_not(None) & a.c.dollars_without.is_not(None)
    expected = read & a.c.expected_read.is_not(None)
    projection = priced & a.c.observed & a.c.dollars_projected.is_not(None)

    def count(condition: sa.ColumnElement[bool]) -> sa.ColumnElement[Any]:
        return sa.func.sum(sa.case((condition, 1), else_=0))

    def when(
        condition: sa.ColumnElement[bool], value: sa.ColumnElement[Any]
    ) -> sa.ColumnElement[Any]:
        return sa.func.sum(sa.case((condition, value), else_=0))

    sums = [
        sa.func.count().label("answers"),
        count(a.c.unread).label("unread"),
        count(read & sa.not_(priced)).label("unpriced"),
        when(priced, a.c.dollars).label("dollars"),
        when(priced, a.c.dollars_without).label("dollars_without"),
        when(expected, a.c.expected_read).label("expected_read"),
        when(expected, a.c.billed_cache_read).label("read_when_expected"),
        count(read & a.c.observed).label("observed"),
        count(read & a.c.observed & (sum(a.c[f"projected_{k}"] for k in TOKEN_KINDS) > 0)).label(
            "projected"
        ),
        when(projection, a.c.dollars).label("dollars_observed"),
        when(projection, a.c.dollars_projected).label("dollars_projected"),
        count(read & a.c.refused.is_not(None)).label("refused"),
        when(read, a.c.readbacks).label("readbacks"),
        when(read, a.c.readback_tokens).label("readback_tokens"),
        when(priced & a.c.dollars_readback.is_not(None), a.c.dollars_readback).label(
            "dollars_readback"
        ),
        sa.func.min(a.c.time).label("first"),
        sa.func.max(a.c.time).label("last"),
    ]
    for kind in TOKEN_KINDS:
        for side in ("billed", "without"):
            sums.append(sa.func.sum(a.c[f"{side}_{kind}"]).label(f"{side}_{kind}"))
    return sums


def _selected(filters: Filters) -> tuple[sa.FromClause, list[sa.ColumnElement[bool]]]:
    """The answers joined once to the tags for each tag the filters ask for, and the
    conditions that select those the filters do."""
    a = ANSWERS
    joined: sa.FromClause = a
    conditions: list[sa.ColumnElement[bool]] = []
    if filters.caller is not None:
        conditions.append(a.c.caller == filters.caller)
    if filters.agent is not None:
        conditions.append(a.c.agent == filters.agent)
    if filters.model is not None:
        conditions.append(a.c.model == filters.model)
    for n, (name, value) in enumerate(filters.tags):
        tag = ANSWER_TAGS.alias(f"tag{n}")
        joined = joined.join(tag, tag.c.answer == a.c.key)
        conditions += [tag.c.name == name, tag.c.value == value]
    return joined, conditions


def _filtered(connection: sa.Connection, limit: int, filters: Filters) -> list[dict[str, Any]]:
    """The sessions of the answers ``filters`` select, their sums over those answers,
    each with what its row says of it (agent, caller, the console's counts)."""
    a, s = ANSWERS, SESSIONS
    joined, conditions = _selected(filters)
    query = (
        sa.select(a.c.session, *_answer_sums(a))
        .select_from(joined)
        .where(*conditions, a.c.session.is_not(None))
        .group_by(a.c.session)
        .order_by(sa.func.max(a.c.time).desc(), a.c.session)
        .limit(limit)
    )
    rows = [dict(row._mapping) for row in connection.execute(query)]
    described = (
        {
            row.session: row._mapping
            for row in connection.execute(
                sa.select(s.c.session, *(s.c[n] for n in _DESCRIBED)).where(
                    s.c.session.in_([row["session"] for row in rows])
                )
            )
        }
        if rows
        else {}
    )
    empty = dict.fromkeys(_DESCRIBED)
    return [{**empty, **described.get(row["session"], {}), **row} for row in rows]


#: What a session's row says of it beside its sums (kept as they are when sums are filtered).
_DESCRIBED = ("agent", "source", "format", "caller", "requests", "repairs", "spills", "compactions")
