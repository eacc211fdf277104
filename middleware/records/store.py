"""A records database: opened (and brought to this release's schema) from its URL, and
written in batches where each answer and request counts once, however often it is written
(:mod:`.batches`).

SQLite (a file, or memory for a proxy that keeps nothing on disk) runs in WAL mode, so
several processes on one machine share a file; PostgreSQL is reached through psycopg 3
(:mod:`.engines`). Everything else about them is SQLAlchemy's: the same statements serve
both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import sqlalchemy as sa

from middleware.policy.secrets import redact_urls
from middleware.records.batches import write_batch
from middleware.records.engines import engine_for
from middleware.records.migrations import upgrade
from middleware.records.rows import AnswerRow, RequestRow
from middleware.records.tables import REQUESTS

logger = logging.getLogger(__name__)

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
        store = cls(engine_for(url), redact_urls(url))
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
            return write_batch(connection, answers, requests)


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
