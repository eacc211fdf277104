"""Records written off the request path: whoever bills an answer or keeps a request's record
puts it in a queue bounded in bytes, and a thread of the writer's own writes what waits in
batches. A database that is down, hung or slow holds nobody up: records wait (up to
``ledger.held_bytes``) and are written when it answers again; past the bound new ones are
dropped, counted and logged once per interval. A batch the database refuses (a value it
will not take) is written one row at a time, so the row it refuses costs that row only.

For a database on another machine the queue's next stop is an outbox on this one
(:mod:`.outbox`): a record is on disk within a batch of being put, so a replica killed, or
restarted while the database is away, sends what it held when it starts again; the keys
make a row sent twice count once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import sqlalchemy as sa

from middleware.logs import IntervalLog
from middleware.records.rows import AnswerRow, RequestRow

logger = logging.getLogger(__name__)

Row = AnswerRow | RequestRow
#: Rows written in one transaction, at most.
BATCH_ROWS = 500
#: Seconds between two tries of a database that failed, at first and at most.
RETRY_SECONDS = (0.25, 5.0)


class Sink(Protocol):
    """Where a writer's batches go (a store, or an outbox in front of one)."""

    #: The database, for messages (no password).
    where: str

    @property
    def held(self) -> int:
        """Bytes it holds that are not in the database yet (counted in the bound)."""
        ...

    def write(self, answers: Sequence[AnswerRow], requests: Sequence[RequestRow]) -> int:
        """Write a batch (in one transaction); raise SQLAlchemy's error if it fails."""
        ...

    def flush(self, timeout: float, clock: Callable[[], float]) -> bool:
        """Wait until what it holds is in the database (``False``: not within ``timeout``)."""
        ...


@dataclass
class WriterCounts:
    """What a writer did since it started (``/metrics`` and ``/healthz`` read them)."""

    written: int = 0
    #: Rows dropped because the queue held ``held_bytes`` already.
    dropped: int = 0
    #: Rows the database refused (each alone: the rest of its batch was written).
    refused: int = 0
    #: Whether the last write reached the database, and what it said if not.
    reachable: bool = True
    error: str | None = None
    since: float | None = field(default=None)


class RecordWriter:
    """A queue of rows and the thread that writes them to ``sink``."""

    def __init__(
        self,
        sink: Sink,
        held_bytes: int,
        *,
        linger_seconds: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sink = sink
        self.held_bytes = held_bytes
        self.linger_seconds = linger_seconds
        self.counts = WriterCounts()
        self._clock = clock
        self._queue: deque[Row] = deque()
        self._held = 0  # bytes of the rows queued and of the batch being written
        self._put = 0  # rows put, ever
        self._done = 0  # rows written, refused or dropped after being queued, ever
        self._closing = False
        self._changed = threading.Condition()
        self._log = IntervalLog(logger)
        self._thread = threading.Thread(target=self._run, name="chatcli-records", daemon=True)
        self._thread.start()

    @property
    def held(self) -> int:
        """Bytes of rows waiting to be written."""
        return self._held

    def put(self, row: Row) -> bool:
        """Queue ``row``; ``False`` (counted, logged) if the queue is full or closed."""
        size = row.size
        with self._changed:
            if self._closing or self._held + self.sink.held + size > self.held_bytes:
                self.counts.dropped += 1
                full = not self._closing
            else:
                self._queue.append(row)
                self._held += size
                self._put += 1
                self._changed.notify_all()
                return True
        if full:
            self._log(
                logging.ERROR,
                "dropped",
                "a record was dropped: %s does not keep up "
                "and %d bytes of records wait already (ledger.held_bytes); %d dropped "
                "since the start",
                self.sink.where,
                self.held_bytes,
                self.counts.dropped,
            )
        return False

    def flush(self, timeout: float) -> bool:
        """Wait until what was put before is written (``False``: not within ``timeout``)."""
        deadline = self._clock() + timeout
        with self._changed:
            target = self._put
            while self._done < target:
                left = deadline - self._clock()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._changed.wait(left)
        return self.sink.flush(max(0.0, deadline - self._clock()), self._clock)

    def close(self, timeout: float) -> bool:
        """Write what waits (within ``timeout``) and stop; ``False`` if rows were left."""
        written = self.flush(timeout)
        with self._changed:
            self._closing = True
            left = len(self._queue)
            self._changed.notify_all()
        self._thread.join(max(0.0, min(timeout, 1.0)))
        if left:
            logger.error(
                "%d records were not written to %s before the proxy stopped: it "
                "did not answer within %g s",
                left,
                self.sink.where,
                timeout,
            )
        return written and not left

    # -- the writing thread -------------------------------------------------------------

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            self._write(batch)
            with self._changed:
                self._held -= sum(row.size for row in batch)
                self._done += len(batch)
                self._changed.notify_all()

    def _take(self) -> list[Row] | None:
        """The next batch, once rows wait (and, after the first, a moment for more)."""
        with self._changed:
            while not self._queue:
                if self._closing:
                    return None
                self._changed.wait()
        if self.linger_seconds:
            time.sleep(self.linger_seconds)
        with self._changed:
            count = min(BATCH_ROWS, len(self._queue))
            return [self._queue.popleft() for _ in range(count)]

    def _write(self, batch: list[Row]) -> None:
        """Write ``batch``, trying again while the database is away. A batch it refuses
        is written again a row at a time: the rows it refuses then are counted and left
        out, the others written."""
        groups = [batch]
        wait = RETRY_SECONDS[0]
        while groups:
            group = groups[0]
            try:
                self._send(group)
            except sa.exc.DBAPIError as exc:
                if not is_unreachable(exc):
                    groups[:1] = [[row] for row in group] if len(group) > 1 else []
                    if len(group) == 1:
                        self._refused(exc)
                    continue
                self._away(exc)
            except Exception as exc:  # a sink failing otherwise is a bug: logged, retried
                logger.exception("records could not be written to %s", self.sink.where)
                self._away(exc)
            else:
                groups.pop(0)
                wait = RETRY_SECONDS[0]
                continue
            with self._changed:
                if self._closing:
                    return
                self._changed.wait(wait)
            wait = min(wait * 2, RETRY_SECONDS[1])

    def _send(self, batch: Sequence[Row]) -> None:
        answers = [row for row in batch if isinstance(row, AnswerRow)]
        requests = [row for row in batch if isinstance(row, RequestRow)]
        self.sink.write(answers, requests)
        self.counts.written += len(batch)
        if not self.counts.reachable:
            self._log(
                logging.WARNING,
                "back",
                "%s answers again: writing the %d records held",
                self.sink.where,
                len(self._queue) + len(batch),
            )
        self.counts.reachable, self.counts.error, self.counts.since = True, None, None

    def _away(self, exc: BaseException) -> None:
        if self.counts.reachable:
            self.counts.since = time.time()
        self.counts.reachable = False
        self.counts.error = _said(exc)
        self._log(
            logging.ERROR,
            "away",
            "cannot write records to %s (%s): they wait, up to "
            "%d bytes (ledger.held_bytes), and are written when it answers",
            self.sink.where,
            self.counts.error,
            self.held_bytes,
        )

    def _refused(self, exc: sa.exc.DBAPIError) -> None:
        self.counts.refused += 1
        self._log(
            logging.ERROR,
            "refused",
            "%s refused a record (%s): it is left out; %d refused since the start",
            self.sink.where,
            _said(exc),
            self.counts.refused,
        )


def is_unreachable(exc: sa.exc.DBAPIError) -> bool:
    """Whether ``exc`` says the database is away (try again), not that it refuses what
    was written (an integrity or data error, a value it does not take)."""
    if exc.connection_invalidated:
        return True
    return isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError)) and not isinstance(
        exc, (sa.exc.IntegrityError, sa.exc.DataError)
    )


def _said(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
