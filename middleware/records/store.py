"""A records database: opened (and brought to this release's schema) from its URL, and
written in batches where each answer and request counts once, however often it is written.

SQLite (a file, or memory for a proxy that keeps nothing on disk) runs in WAL mode, so
several processes on one machine share a file; PostgreSQL is reached through psycopg 3.
Everything else about them is SQLAlchemy's: the same statements serve both.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.pool import StaticPool

from middleware.errors import MissingExtraError, PolicyError
from middleware.policy.secrets import redact_urls
from middleware.records.dialects import new_rows
from middleware.records.migrations import upgrade
from middleware.records.rows import AnswerRow, RequestRow
from middleware.records.tables import (
    ANSWER_TAGS,
    ANSWERS,
    DAYS,
    REQUESTS,
    SESSION_MODELS,
    SESSIONS,
    TOKEN_KINDS,
)

logger = logging.getLogger(__name__)

#: Seconds a SQLite writer waits for another process's write to end.
SQLITE_BUSY_SECONDS = 30.0
#: Seconds PostgreSQL is given to take a connection.
CONNECT_SECONDS = 5
#: The URL of a store in this process's memory.
MEMORY = "sqlite://"


class RecordStore:
    """One records database. Thread-safe: a store in memory is one connection, used by one
    thread at a time; a file or a server gives each thread a connection of its own."""

    def __init__(self, engine: sa.Engine, where: str) -> None:
        self.engine = engine
        #: The database, for messages: its URL without a password.
        self.where = where
        self._serial = threading.Lock() if engine.url.database in (None, "", ":memory:") else None
        self._ready = False
        self._readying = threading.Lock()

    @classmethod
    def open(cls, url: str, *, away_ok: bool = False) -> RecordStore:
        """The store at ``url`` (``sqlite:///PATH``, ``postgresql://...``, or
        :data:`MEMORY`), its schema brought to this release's. With ``away_ok``, a
        database that does not answer yet is no error: its schema is checked the first
        time it does (a replica starts while its database is down).

        :raises PolicyError: the URL names no database this store writes to.
        :raises MissingExtraError: it is PostgreSQL and psycopg is not installed.
        :raises SchemaVersionError: the database was written by a newer release.
        """
        store = cls(_engine(url), redact_urls(url))
        try:
            store.ready()
        except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
            if not away_ok:
                store.close()
                raise
            said = str(exc.orig or exc).strip().splitlines()
            logger.warning("the records database %s does not answer (%s): records wait for "
                           "it, and its schema is checked when it answers", store.where,
                           redact_urls(said[0] if said else type(exc).__name__))  # fmt: skip
        except BaseException:
            store.close()
            raise
        return store

    @property
    def answered(self) -> bool:
        """Whether the database has answered since the store opened (its schema ready)."""
        return self._ready

    def ready(self) -> None:
        """Bring the database's schema to this release's, once: the first time it
        answers (:func:`.migrations.upgrade`).

        :raises SchemaVersionError: the database was written by a newer release.
        """
        if self._ready:
            return
        with self._readying:
            if not self._ready:
                upgrade(self.engine, self.where)
                self._ready = True

    #: A store holds nothing on its way: what it is given is written before ``write``
    #: returns (:class:`.writer.Sink`).
    held = 0

    def flush(self, timeout: float, clock: Callable[[], float]) -> bool:
        return True

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def connection(self) -> Iterator[sa.Connection]:
        """A connection in a transaction, committed as the block ends (the schema made
        ready first)."""
        self.ready()
        if self._serial is None:
            with self.engine.begin() as connection:
                yield connection
            return
        with self._serial, self.engine.begin() as connection:
            yield connection

    def close(self) -> None:
        self.engine.dispose()

    # -- written ------------------------------------------------------------------------

    def write(self, answers: Sequence[AnswerRow], requests: Sequence[RequestRow]) -> int:
        """Write the rows this database does not hold yet, and add those to their
        sessions' and days' sums, in one transaction; returns how many rows were new."""
        with self.connection() as connection:
            return _write(connection, answers, requests)


def prune(store: RecordStore, *, before: float | None, most_bytes: int | None) -> int:
    """Remove the console's records of requests older than ``before`` (a time), then the
    oldest past ``most_bytes`` in all; the answers and every sum stay. How many went."""
    r = REQUESTS
    removed = 0
    with store.connection() as connection:
        if before is not None:
            removed += connection.execute(sa.delete(r).where(r.c.time < before)).rowcount
        if most_bytes is not None:
            total = connection.execute(sa.select(sa.func.sum(r.c.bytes))).scalar() or 0
            if total > most_bytes:
                newer = sa.func.sum(r.c.bytes).over(order_by=r.c.seq.desc()).label("newer")
                ranked = sa.select(r.c.seq, newer).subquery()
                kept = connection.execute(
                    sa.select(sa.func.min(ranked.c.seq)).where(ranked.c.newer <= most_bytes)
                ).scalar()
                cut = r.c.seq < kept if kept is not None else sa.true()
                removed += connection.execute(sa.delete(r).where(cut)).rowcount
    return removed


def _write(
    connection: sa.Connection, answers: Sequence[AnswerRow], requests: Sequence[RequestRow]
) -> int:
    new = 0
    # A row given twice in one batch is written once, as if in two.
    requests = list({r.key: r for r in reversed(requests)}.values())[::-1]
    answers = list({a.key: a for a in reversed(answers)}.values())[::-1]
    # Each session's row is locked (made if need be) before any row is numbered: a
    # session's requests then get their ``seq`` in the order they are committed, which
    # the console's polls (after the newest seq shown) rely on; and in one order for all
    # sessions, so two batches never wait for each other's.
    times: dict[str, list[float]] = defaultdict(list)
    rows: list[AnswerRow | RequestRow] = [*requests, *answers]
    for row in rows:
        if row.session is not None:
            times[row.session].append(row.time)
    for session in sorted(times):
        _session_row(connection, session, min(times[session]), max(times[session]))
    if requests:
        written = _insert_new(connection, REQUESTS, [r.row() for r in requests], "key")
        seen = [r for r in requests if r.key in written]
        new += len(seen)
        for request in sorted(seen, key=lambda r: r.session):  # one order: no deadlock
            _count_request(connection, request)
    if answers:
        written = _insert_new(connection, ANSWERS, [a.row() for a in answers], "key")
        fresh = [a for a in answers if a.key in written]
        new += len(fresh)
        tags = [
            {"answer": a.key, "name": name, "value": value} for a in fresh for name, value in a.tags
        ]
        if tags:
            connection.execute(new_rows(connection, ANSWER_TAGS), tags)
        by_session: dict[str, list[AnswerRow]] = defaultdict(list)
        by_day: dict[tuple[str, str], list[AnswerRow]] = defaultdict(list)
        for answer in fresh:
            if answer.session is not None:
                by_session[answer.session].append(answer)
            by_day[answer.row()["day"], answer.model or ""].append(answer)
        for session in sorted(by_session):
            _add_to_session(connection, session, by_session[session])
        for day, model in sorted(by_day):
            _add_sums(
                connection, DAYS,
                (DAYS.c.day == day) & (DAYS.c.model == model),
                {"day": day, "model": model}, by_day[day, model],
            )  # fmt: skip
    return new


def _insert_new(
    connection: sa.Connection, table: sa.Table, rows: list[dict[str, Any]], key: str
) -> set[str]:
    """Insert ``rows`` but those whose ``key`` is there; the keys of those inserted."""
    statement = new_rows(connection, table).returning(table.c[key])
    return set(connection.execute(statement, rows).scalars().all())


def _earliest(column: sa.Column[float], when: float) -> sa.ColumnElement[float]:
    return sa.case((column > when, when), else_=column)


def _latest(column: sa.Column[float], when: float) -> sa.ColumnElement[float]:
    return sa.case((column < when, when), else_=column)


def _session_row(connection: sa.Connection, session: str, first: float, last: float) -> None:
    """The session's row, made if it has none, its first and last times widened."""
    s = SESSIONS
    connection.execute(new_rows(connection, s).values(session=session, first=first, last=last))
    connection.execute(
        sa.update(s)
        .where(s.c.session == session)
        .values(first=_earliest(s.c.first, first), last=_latest(s.c.last, last))
    )


def _count_request(connection: sa.Connection, request: RequestRow) -> None:
    s = SESSIONS
    _session_row(connection, request.session, request.time, request.time)
    values: dict[str, Any] = {
        "requests": s.c.requests + 1,
        "repairs": s.c.repairs + request.repairs,
        "spills": s.c.spills + request.spills,
        "compactions": s.c.compactions + request.compactions,
    }
    for name in ("agent", "source", "format", "caller"):
        value = getattr(request, name)
        if value is not None:
            values[name] = value
    connection.execute(sa.update(s).where(s.c.session == request.session).values(values))


def _add_to_session(connection: sa.Connection, session: str, answers: list[AnswerRow]) -> None:
    times = [a.time for a in answers]
    _session_row(connection, session, min(times), max(times))
    s = SESSIONS
    _add_sums(connection, s, s.c.session == session, None, answers)
    models: dict[str, int] = defaultdict(int)
    for answer in answers:
        if answer.model:
            models[answer.model] += 1
    m = SESSION_MODELS
    for model in sorted(models):
        connection.execute(new_rows(connection, m).values(session=session, model=model))
        connection.execute(
            sa.update(m)
            .where((m.c.session == session) & (m.c.model == model))
            .values(answers=m.c.answers + models[model])
        )


def _add_sums(
    connection: sa.Connection,
    table: sa.Table,
    where: sa.ColumnElement[bool],
    made: dict[str, Any] | None,
    answers: list[AnswerRow],
) -> None:
    """Add ``answers`` to the running sums of ``table``'s row ``where`` selects (made
    from ``made`` first if it is not there)."""
    if made is not None:
        connection.execute(new_rows(connection, table).values(made))
    c = table.c
    read = [a for a in answers if not a.unread]
    priced = [a for a in read if a.priced]
    expected = [a for a in read if a.expected_read is not None]
    values: dict[str, Any] = {
        "answers": c.answers + len(answers),
        "unread": c.unread + (len(answers) - len(read)),
        "unpriced": c.unpriced + (len(read) - len(priced)),
        "dollars": c.dollars + sum(a.dollars or 0.0 for a in priced),
        "dollars_without": c.dollars_without + sum(a.dollars_without or 0.0 for a in priced),
        "expected_read": c.expected_read + sum(a.expected_read or 0 for a in expected),
        "read_when_expected": c.read_when_expected
        + sum(a.billed.get("cache_read", 0) for a in expected),
    }
    for kind in TOKEN_KINDS:
        for side in ("billed", "without"):
            name = f"{side}_{kind}"
            values[name] = c[name] + sum(getattr(a, side).get(kind, 0) for a in read)
    connection.execute(sa.update(table).where(where).values(values))


def _engine(url: str) -> sa.Engine:
    """The engine for ``url``, with each database's settings."""
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError as exc:
        raise PolicyError(
            f"ledger.url: {redact_urls(url)!r} is not a database URL: {exc}"
        ) from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite(parsed)
    if backend in ("postgresql", "postgres"):
        try:
            import psycopg  # noqa: F401, PLC0415 - only a fleet needs it
        except ImportError as exc:
            raise MissingExtraError("postgres", "psycopg[binary]>=3.1", "ledger.url") from exc
        return sa.create_engine(
            parsed.set(drivername="postgresql+psycopg"),
            pool_pre_ping=True, pool_size=4, max_overflow=4, pool_timeout=10,
            connect_args={"connect_timeout": CONNECT_SECONDS, "application_name": "chatcli-mw"},
        )  # fmt: skip
    raise PolicyError(
        f"ledger.url: {redact_urls(url)!r} names a {backend} database; the records go to "
        "SQLite (sqlite:///PATH) or PostgreSQL (postgresql://USER@HOST/DATABASE)"
    )


def _sqlite(url: sa.URL) -> sa.Engine:
    database = url.database or ""
    if database in ("", ":memory:"):
        engine = sa.create_engine(
            "sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False}
        )
    else:
        path = Path(database).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(
            url.set(drivername="sqlite+pysqlite", database=str(path)),
            connect_args={"timeout": SQLITE_BUSY_SECONDS},
        )

    @sa.event.listens_for(engine, "connect")
    def configure(connection: Any, _: Any) -> None:
        cursor = connection.cursor()
        if database not in ("", ":memory:"):
            cursor.execute("PRAGMA journal_mode=WAL")  # readers beside a writer, processes
            cursor.execute("PRAGMA synchronous=NORMAL")  # durable at each checkpoint in WAL
        cursor.close()

    return engine
