"""A records database's engine, from its URL: SQLite (a file in WAL mode, so several
processes on one machine share it, or memory for a proxy that keeps nothing on disk) or
PostgreSQL through psycopg 3, each with its settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.pool import StaticPool

from middleware.errors import MissingExtraError, PolicyError
from middleware.policy.secrets import redact_urls

#: Seconds a SQLite writer waits for another process's write to end.
SQLITE_BUSY_SECONDS = 30.0
#: Seconds PostgreSQL is given to take a connection.
CONNECT_SECONDS = 5


def engine_for(url: str) -> sa.Engine:
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
