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
from middleware.records.dialects import merged_rows, new_rows
from middleware.records.migrations import upgrade
from middleware.records.rows import AnswerRow, RequestRow
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
            logger.warning(
                "the records database %s does not answer (%s): records wait for "
                "it, and its schema is checked when it answers",
                store.where,
                redact_urls(said[0] if said else type(exc).__name__),
            )
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
        """Let go of the database. A store in memory waits for the connection's user (a
        thread pruning it): its one connection closed under a running statement would
        crash the process, not fail the statement."""
        if self._serial is None:
            self.engine.dispose()
            return
        with self._serial:
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
    # A row given twice in one batch is written once, as if in two.
    requests = list({r.key: r for r in reversed(requests)}.values())[::-1]
    answers = list({a.key: a for a in reversed(answers)}.values())[::-1]
    # Each session's row is locked (made if need be) before any row is numbered: a
    # session's requests then get their ``seq`` in the order they are committed, which
    # the console's polls (after the newest seq shown) rely on; and in one order for all
    # sessions, so two batches never wait for each other's.
    spans: dict[str, tuple[float, float]] = {}
    rows: list[AnswerRow | RequestRow] = [*requests, *answers]
    for row in rows:
        if row.session is not None:
            first, last = spans.get(row.session, (row.time, row.time))
            spans[row.session] = (min(first, row.time), max(last, row.time))
    _lock_sessions(connection, spans)
    seen: list[RequestRow] = []
    fresh: list[AnswerRow] = []
    if requests:
        written = _insert_new(connection, REQUESTS, [r.row() for r in requests], "key")
        seen = [r for r in requests if r.key in written]
    if answers:
        written = _insert_new(connection, ANSWERS, [a.row() for a in answers], "key")
        fresh = [a for a in answers if a.key in written]
        tags = [
            {"answer": a.key, "name": name, "value": value} for a in fresh for name, value in a.tags
        ]
        if tags:
            connection.execute(new_rows(connection, ANSWER_TAGS), tags)
    _add_to_sessions(connection, seen, fresh)
    _add_to_days(connection, fresh)
    return len(seen) + len(fresh)


def _insert_new(
    connection: sa.Connection, table: sa.Table, rows: list[dict[str, Any]], key: str
) -> set[str]:
    """Insert ``rows`` but those whose ``key`` is there; the keys of those inserted."""
    return set(connection.execute(new_rows(connection, table, key), rows).scalars().all())


# Each batch moves the sums through these statements, made once with their parameters
# bound at each execution (one execution for all the sessions or days of a batch): building
# and keying a statement per row cost more CPU than the database's work (issue 44, item 8).


def _widened(table: sa.Table, given: Any) -> dict[str, sa.ColumnElement[Any]]:
    """``first`` and ``last`` widened to the row ``given``'s."""
    c = table.c
    return {
        "first": sa.case((c.first > given.first, given.first), else_=c.first),
        "last": sa.case((c.last < given.last, given.last), else_=c.last),
    }


def _summed(names: Sequence[str]) -> Callable[[sa.Table, Any], dict[str, Any]]:
    """Each column of ``names`` plus the row given's."""

    def merge(table: sa.Table, given: Any) -> dict[str, Any]:
        return {n: table.c[n] + given[n] for n in names}

    return merge


_ADD_ANSWERS = _summed(("answers",))
_ADD_SUMS = _summed(SUMS)

#: What the console's requests add to their session's row (and the names they set).
_REQUEST_COUNTS = ("requests", "repairs", "spills", "compactions")
_REQUEST_NAMES = ("agent", "source", "format", "caller")

_S = SESSIONS
#: A batch's addition to a session's row: its requests' counts and names, its answers' sums.
_ADD_TO_SESSION = (
    sa.update(_S)
    .where(_S.c.session == sa.bindparam("at_session", type_=sa.String))
    .values(
        {
            **{
                n: _S.c[n] + sa.bindparam(f"add_{n}", type_=_S.c[n].type)
                for n in (*_REQUEST_COUNTS, *SUMS)
            },
            **{
                n: sa.func.coalesce(sa.bindparam(f"set_{n}", type_=sa.String), _S.c[n])
                for n in _REQUEST_NAMES
            },
        }
    )
)


def _lock_sessions(connection: sa.Connection, spans: dict[str, tuple[float, float]]) -> None:
    """The sessions' rows, made where there are none yet, their first and last times
    widened to ``spans``: each row locked, in one order for every batch."""
    sessions = sorted(spans)
    if sessions:
        connection.execute(
            merged_rows(connection, SESSIONS, ("session",), _widened),
            [{"session": s, "first": spans[s][0], "last": spans[s][1]} for s in sessions],
        )


def _add_to_sessions(
    connection: sa.Connection, requests: list[RequestRow], answers: list[AnswerRow]
) -> None:
    """Add the rows newly written to their sessions' rows (:func:`_lock_sessions` made
    them): the requests' counts and the agent, source, format and caller the latest of
    them says; the answers' sums, and their models."""
    asked: dict[str, list[RequestRow]] = defaultdict(list)
    for request in requests:
        asked[request.session].append(request)
    answered: dict[str, list[AnswerRow]] = defaultdict(list)
    for answer in answers:
        if answer.session is not None:
            answered[answer.session].append(answer)
    sessions = sorted({*asked, *answered})  # one order: no deadlock
    if not sessions:
        return
    additions = []
    models: dict[tuple[str, str], int] = defaultdict(int)
    for session in sessions:
        for answer in answered.get(session, []):
            if answer.model:
                models[session, answer.model] += 1
        found = asked.get(session, [])
        values: dict[str, Any] = {"at_session": session, "add_requests": len(found)}
        for name in _REQUEST_COUNTS[1:]:
            values[f"add_{name}"] = sum(getattr(r, name) for r in found)
        for name in _REQUEST_NAMES:
            said = [getattr(r, name) for r in found if getattr(r, name) is not None]
            values[f"set_{name}"] = said[-1] if said else None
        sums = _sums(answered.get(session, []))
        values.update({f"add_{name}": sums[name] for name in SUMS})
        additions.append(values)
    connection.execute(_ADD_TO_SESSION, additions)
    if models:
        connection.execute(
            merged_rows(connection, SESSION_MODELS, ("session", "model"), _ADD_ANSWERS),
            [{"session": s, "model": m, "answers": models[s, m]} for s, m in sorted(models)],
        )


def _add_to_days(connection: sa.Connection, answers: list[AnswerRow]) -> None:
    """Add the answers newly written to the sums of their days and models."""
    if not answers:
        return
    by_day: dict[tuple[str, str], list[AnswerRow]] = defaultdict(list)
    for answer in answers:
        by_day[answer.row()["day"], answer.model or ""].append(answer)
    connection.execute(
        merged_rows(connection, DAYS, ("day", "model"), _ADD_SUMS),
        [{"day": d, "model": m, **_sums(by_day[d, m])} for d, m in sorted(by_day)],
    )


def _sums(answers: list[AnswerRow]) -> dict[str, Any]:
    """What ``answers`` add to a row of running sums, by column (:data:`SUMS`)."""
    read = [a for a in answers if not a.unread]
    priced = [a for a in read if a.priced]
    expected = [a for a in read if a.expected_read is not None]
    values: dict[str, Any] = {
        "answers": len(answers),
        "unread": len(answers) - len(read),
        "unpriced": len(read) - len(priced),
        "dollars": sum(a.dollars or 0.0 for a in priced),
        "dollars_without": sum(a.dollars_without or 0.0 for a in priced),
        "expected_read": sum(a.expected_read or 0 for a in expected),
        "read_when_expected": sum(a.billed.get("cache_read", 0) for a in expected),
        "observed": sum(a.observed for a in read),
        "projected": sum(1 for a in read if a.observed and any(a.projected.values())),
        "dollars_observed": sum(a.dollars or 0.0 for a in read if a.projection_priced),
        "dollars_projected": sum(a.dollars_projected or 0.0 for a in read if a.projection_priced),
        "refused": sum(a.refused is not None for a in read),
        "readbacks": sum(a.readbacks for a in read),
        "readback_tokens": sum(a.readback_tokens for a in read),
        "dollars_readback": sum(a.dollars_readback or 0.0 for a in priced),
    }
    for kind in TOKEN_KINDS:
        for side in ("billed", "without"):
            values[f"{side}_{kind}"] = sum(getattr(a, side).get(kind, 0) for a in read)
    return values


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
        return sqlite_engine(parsed)
    if backend in ("postgresql", "postgres"):
        try:
            import psycopg  # noqa: F401, PLC0415 - only a fleet needs it
        except ImportError as exc:
            raise MissingExtraError("postgres", "psycopg[binary]>=3.1", "ledger.url") from exc
        return sa.create_engine(
            parsed.set(drivername="postgresql+psycopg"),
            pool_pre_ping=True,
            pool_size=4,
            max_overflow=4,
            pool_timeout=10,
            # No server-side prepared statements (psycopg prepares a query run 5 times):
            # a pooler in transaction mode (PgBouncer) hands each transaction another
            # server connection, where they do not exist (docs/scaling.md).
            connect_args={
                "connect_timeout": CONNECT_SECONDS,
                "application_name": "chatcli-mw",
                "prepare_threshold": None,
            },
        )
    raise PolicyError(
        f"ledger.url: {redact_urls(url)!r} names a {backend} database; the records go to "
        "SQLite (sqlite:///PATH) or PostgreSQL (postgresql://USER@HOST/DATABASE)"
    )


def sqlite_engine(url: sa.URL) -> sa.Engine:
    """An engine on the SQLite database of ``url`` (a file: WAL, ``synchronous=NORMAL``;
    none: one in memory shared by the process's threads)."""
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
