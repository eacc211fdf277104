"""The records a replica holds for a database on another machine: a SQLite file of its own
(``outbox-REPLICA.sqlite`` in the state folder) that the writer's thread fills and a
shipping thread empties into the database, oldest first.

What is in the outbox survives the process: a replica killed, or stopped while the
database is away, sends it when it starts again. A batch is removed from the outbox only
once the database has committed it; should the replica die between the two, the batch is
sent again and its keys make it count once.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from middleware.logs import IntervalLog
from middleware.records.engines import sqlite_engine
from middleware.records.rows import AnswerRow, RequestRow
from middleware.records.store import RecordStore
from middleware.records.writer import BATCH_ROWS, RETRY_SECONDS, WriterCounts, is_unreachable

logger = logging.getLogger(__name__)

_metadata = sa.MetaData()
_outbox = sa.Table(
    "chatcli_outbox",
    _metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
    # A request's record as it is (its other fields are the body's JSON).
    sa.Column("record", sa.LargeBinary),
    sa.Column("bytes", sa.Integer, nullable=False),
    # Ids are never used again once removed: what has been sent is "every id up to N".
    sqlite_autoincrement=True,
)


class Outbox:
    """A writer's sink in front of ``target``: rows go to a local file at once, and a
    thread sends them on. :attr:`counts` are the sending's (the target's reachability)."""

    def __init__(self, path: Path, target: RecordStore, linger_seconds: float = 0.0) -> None:
        self.target = target
        #: Seconds the sending thread waits, once rows come, for more to send with them
        #: (fewer, larger transactions on the database; they are on disk meanwhile).
        self.linger_seconds = linger_seconds
        self.where = target.where
        self.counts = WriterCounts()
        path.parent.mkdir(parents=True, exist_ok=True)
        # WAL, synchronous=NORMAL (the store's SQLite settings): a commit outlives the
        # process being killed, and costs no journal file of its own.
        self._local = RecordStore(sqlite_engine(sa.make_url(f"sqlite:///{path}")), str(path))
        _metadata.create_all(self._local.engine)
        self._log = IntervalLog(logger)
        self._changed = threading.Condition()
        self._written = self._last_id()  # the newest row in the file
        with self._local.connection() as connection:
            total = connection.execute(sa.select(sa.func.sum(_outbox.c.bytes))).scalar()
        self._held = int(total or 0)
        self._shipped = 0  # the newest row sent on
        self._hurry = False  # a flush waits: send without lingering
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="chatcli-outbox", daemon=True)
        self._thread.start()

    @property
    def held(self) -> int:
        """Bytes the outbox holds."""
        return self._held

    def write(self, answers: Sequence[AnswerRow], requests: Sequence[RequestRow]) -> int:
        rows = [_packed("answer", a) for a in answers] + [_packed("request", r) for r in requests]
        with self._local.connection() as connection:
            connection.execute(sa.insert(_outbox), rows)
            last = int(connection.execute(sa.select(sa.func.max(_outbox.c.id))).scalar() or 0)
        with self._changed:
            self._held += sum(row["bytes"] for row in rows)
            self._written = max(self._written, last)
            self._changed.notify_all()
        return len(rows)

    def flush(self, timeout: float, clock: Callable[[], float]) -> bool:
        """Wait until what is in the outbox now has been sent on."""
        deadline = clock() + timeout
        with self._changed:
            target = self._written
            self._hurry = True  # no lingering for more
            self._changed.notify_all()
            while self._shipped < target:
                left = deadline - clock()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._changed.wait(left)
        return True

    def close(self) -> None:
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._thread.join(1.0)
        self._local.close()

    # -- the sending thread -------------------------------------------------------------

    def _last_id(self) -> int:
        with self._local.connection() as connection:
            return int(connection.execute(sa.select(sa.func.max(_outbox.c.id))).scalar() or 0)

    def _run(self) -> None:
        wait = RETRY_SECONDS[0]
        while True:
            with self._changed:
                while self._shipped >= self._written and not self._closing:
                    self._changed.wait()
                if self._closing:
                    return
                self._linger()
            try:
                sent = self._send_oldest()
            except Exception as exc:  # away, or refusing all (a newer schema): kept, retried
                self._away(exc)
                with self._changed:
                    self._changed.wait(wait)
                wait = min(wait * 2, RETRY_SECONDS[1])
                continue
            wait = RETRY_SECONDS[0]
            with self._changed:
                self._shipped = max(self._shipped, sent)
                self._changed.notify_all()

    def _linger(self) -> None:
        """Wait (lock held) up to :attr:`linger_seconds` for a batch's worth of rows, unless
        a flush or a close asks for them now."""
        until = time.monotonic() + self.linger_seconds
        while not (self._closing or self._hurry or self._written - self._shipped >= BATCH_ROWS):
            left = until - time.monotonic()
            if left <= 0:
                break
            self._changed.wait(left)
        self._hurry = False

    def _send_oldest(self) -> int:
        """Send the oldest batch on and remove it; the newest id now sent (all of them,
        when the outbox is empty)."""
        with self._local.connection() as connection:
            batch = connection.execute(
                sa.select(_outbox).order_by(_outbox.c.id).limit(BATCH_ROWS)
            ).all()
        if not batch:
            return self._written
        answers = [_unpacked(r, AnswerRow) for r in batch if r.kind == "answer"]
        requests = [_unpacked(r, RequestRow) for r in batch if r.kind == "request"]
        try:
            self.target.write(answers, requests)  # type: ignore[arg-type]
        except sa.exc.DBAPIError as exc:
            if is_unreachable(exc) or len(batch) == 1:
                raise
            self._one_at_a_time(batch)
        else:
            self.counts.written += len(batch)
            self._back()
        with self._local.connection() as connection:
            connection.execute(sa.delete(_outbox).where(_outbox.c.id <= batch[-1].id))
        with self._changed:
            self._held -= sum(row.bytes for row in batch)
        return int(batch[-1].id)

    def _one_at_a_time(self, batch: Sequence[Any]) -> None:
        for row in batch:
            kind = AnswerRow if row.kind == "answer" else RequestRow
            single = _unpacked(row, kind)
            try:
                if isinstance(single, AnswerRow):
                    self.target.write([single], [])
                else:
                    self.target.write([], [single])
            except sa.exc.DBAPIError as exc:
                if is_unreachable(exc):
                    raise
                self.counts.refused += 1
                self._log(
                    logging.ERROR,
                    "refused",
                    "%s refused a record (%s): it is left out",
                    self.where,
                    exc.orig,
                )
            else:
                self.counts.written += 1

    def _away(self, exc: Exception) -> None:
        self.counts.reachable = False
        said = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        self.counts.error = said[0][:300] if said else type(exc).__name__
        self._log(
            logging.ERROR,
            "away",
            "cannot send records to %s (%s): they wait in the outbox and are sent when it answers",
            self.where,
            self.counts.error,
        )

    def _back(self) -> None:
        if not self.counts.reachable:
            self._log(logging.WARNING, "back", "%s answers again", self.where)
        self.counts.reachable, self.counts.error = True, None


def _packed(kind: str, row: AnswerRow | RequestRow) -> dict[str, Any]:
    fields = {f.name: getattr(row, f.name) for f in dataclasses.fields(row)}
    record = fields.pop("record", None)
    body = json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return {"kind": kind, "body": body, "record": record, "bytes": row.size}


def _unpacked(stored: Any, kind: type[AnswerRow] | type[RequestRow]) -> AnswerRow | RequestRow:
    """The row an outbox row holds (``stored``: with its ``body`` and ``record``)."""
    fields = json.loads(stored.body)
    if kind is RequestRow:
        return RequestRow(**fields, record=bytes(stored.record))
    fields["tags"] = tuple(tuple(pair) for pair in fields.get("tags", ()))
    return AnswerRow(**fields)
