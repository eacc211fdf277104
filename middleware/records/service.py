"""The records of one process: the database its settings name, the writer in front of it
(and the outbox, for a database on a server), and the pruning of old console records.

Whoever records (the ledger, the console) puts rows here and never waits for the
database; whoever reads (``/sessions``, the pages, ``chatcli-mw ledger``) reads
:meth:`Records.store` after this process's own rows are written, so a request's answer
is in the sums the next read shows.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from middleware.policy.secrets import redact_urls
from middleware.records.outbox import Outbox
from middleware.records.rows import AnswerRow, RequestRow
from middleware.records.settings import RecordSettings, state_folder
from middleware.records.store import MEMORY, RecordStore, prune
from middleware.records.writer import RecordWriter

logger = logging.getLogger(__name__)

#: Seconds between two prunings of old console records.
PRUNE_SECONDS = 3600.0
#: Seconds a read waits for this process's rows to be written first.
READ_AFTER_WRITE_SECONDS = 1.0
#: Seconds closing waits for the rows still queued.
CLOSE_SECONDS = 5.0
#: Seconds the outbox waits, once records come, for more to send to the database with them:
#: a transaction a second at most from each replica, whatever its rate (a flush, which a
#: read of this replica makes first, does not wait).
SEND_LINGER_SECONDS = 1.0


class Records:
    """A process's records: rows put, written off the caller's path, read back."""

    def __init__(
        self, store: RecordStore, writer: RecordWriter, replica: str, outbox: Outbox | None = None
    ) -> None:
        self._store = store
        self.writer = writer
        self.replica = replica
        self.outbox = outbox
        self.settings: RecordSettings | None = None
        self._pruning: threading.Timer | None = None
        self._knocking: threading.Thread | None = None
        self._shares = 1
        self._key: tuple[str, str] | None = None
        self._closed = False

    @classmethod
    def shared(cls, settings: RecordSettings, *, replica: str) -> Records:
        """The records of this process on the database ``settings`` name, opened once
        and shared by every host of the process that names it (two wrapped clients, a
        proxy beside them): one writer, so each reads what the others wrote. Each
        :meth:`close` lets go of one share; the last closes it. ``ledger.url: null``
        gives each host records of its own, in memory."""
        if settings.database is None:
            return cls.open(settings, replica=replica)
        key = (settings.database, replica)
        with _SHARED_LOCK:
            found = _SHARED.get(key)
            if found is not None and not found._closed:
                found._shares += 1
                return found
            opened = cls.open(settings, replica=replica)
            opened._key = key
            _SHARED[key] = opened
            return opened

    @classmethod
    def open(cls, settings: RecordSettings, *, replica: str) -> Records:
        """The records ``settings`` name (an in-memory database for ``ledger.url: null``).

        :raises PolicyError: ``ledger.url`` names no database this works with.
        :raises MissingExtraError: PostgreSQL without the ``[postgres]`` extra.
        :raises SchemaVersionError: the database was written by a newer release.
        """
        url = settings.database or MEMORY
        store = RecordStore.open(url, away_ok=settings.remote)
        outbox = None
        if settings.remote:
            outbox = Outbox(
                state_folder() / f"outbox-{_file_name(replica)}.sqlite",
                store,
                linger_seconds=SEND_LINGER_SECONDS,
            )
        writer = RecordWriter(outbox if outbox is not None else store, settings.held_bytes)
        records = cls(store, writer, replica, outbox)
        records.settings = settings
        return records

    @classmethod
    def in_memory(cls, replica: str = "local", held_bytes: int = 64 * 1024 * 1024) -> Records:
        """Records in this process's memory only (``ledger.url: null``)."""
        store = RecordStore.open(MEMORY)
        return cls(store, RecordWriter(store, held_bytes), replica)

    def put(self, row: AnswerRow | RequestRow) -> bool:
        """Record ``row`` (written soon, off the caller's path); ``False`` if dropped."""
        return self.writer.put(row)

    def store(self, wait: float = READ_AFTER_WRITE_SECONDS) -> RecordStore:
        """The database to read, once the rows this process put are written (``wait``
        seconds at most: a database that is away is read as it is)."""
        self.writer.flush(wait)
        return self._store

    @property
    def where(self) -> str:
        return self._store.where

    def health(self) -> dict[str, Any]:
        """Whether the database answers, and what waits for it (``/healthz``)."""
        counts = self.outbox.counts if self.outbox is not None else self.writer.counts
        error = counts.error or self.writer.counts.error
        answered = self._store.answered
        if not answered:
            self._knock()
            error = error or "it has not answered since the proxy started"
        return {
            "url": self._store.where,
            "reachable": answered and counts.reachable and self.writer.counts.reachable,
            "error": None if error is None else redact_urls(error),
            "held_bytes": self.writer.held + self.writer.sink.held,
            "dropped": self.writer.counts.dropped,
            "refused": self.writer.counts.refused
            + (self.outbox.counts.refused if self.outbox is not None else 0),
        }

    def _knock(self) -> None:
        """Try the database once more, in a thread of its own (one at a time): a health
        check never waits for it."""
        if self._knocking is not None and self._knocking.is_alive():
            return

        def knock() -> None:
            with contextlib.suppress(Exception):
                self._store.ready()

        self._knocking = threading.Thread(target=knock, name="chatcli-records-knock", daemon=True)
        self._knocking.start()

    def prune(self, now: float | None = None) -> int:
        """Remove the console records ``ledger.keep_days`` and ``ledger.console_bytes``
        no longer keep; how many went."""
        settings = self.settings
        if settings is None:
            return 0
        now = time.time() if now is None else now
        before = None if settings.keep_days is None else now - settings.keep_days * 86400
        removed = prune(self.store(), before=before, most_bytes=settings.console_bytes)
        if removed:
            logger.info(
                "removed %d console records of %s past ledger.keep_days or ledger.console_bytes",
                removed,
                self._store.where,
            )
        return removed

    def prune_every(self, seconds: float = PRUNE_SECONDS) -> None:
        """Prune now and every ``seconds`` until closed (the proxy does; a library
        client leaves it to the proxy or to ``chatcli-mw ledger prune``)."""

        def run() -> None:
            try:
                self.prune()
            except Exception:  # a database away: tried again next time
                logger.exception("could not prune the console records of %s", self.where)
            if not self._closed:
                self._pruning = threading.Timer(seconds, run)
                self._pruning.daemon = True
                self._pruning.start()

        self._pruning = threading.Timer(0, run)
        self._pruning.daemon = True
        self._pruning.start()

    def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """Write what is queued (``timeout`` seconds at most), then let go (of a share,
        for records :meth:`shared`: the last one closes them)."""
        with _SHARED_LOCK:
            self._shares -= 1
            if self._shares > 0 or self._closed:
                return
            if self._key is not None and _SHARED.get(self._key) is self:
                del _SHARED[self._key]
        self._closed = True
        if self._pruning is not None:
            self._pruning.cancel()
        self.writer.close(timeout)
        if self.outbox is not None:
            self.outbox.close()
        self._store.close()


#: The records this process shares, by database and replica (:meth:`Records.shared`).
_SHARED: dict[tuple[str, str], Records] = {}
_SHARED_LOCK = threading.Lock()


def _file_name(replica: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in replica)[:128]
