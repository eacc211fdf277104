"""The ledger files (``ledger.file``, one JSON line per answer, and the parts and sums of
their rotations) summed as they are read: what ``chatcli-mw ledger --file`` prints and
``chatcli-mw ledger import`` moves into the records database, and what a rotation sums."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from middleware.ledger.archive import read_into
from middleware.ledger.checks import name, read_text, read_time
from middleware.ledger.entry import Entry
from middleware.ledger.sums import MAX_MODELS_IN_TOTAL, MAX_SESSIONS, SessionLedger


class FileLedger:
    """The sums of ledger files, read a line at a time: the totals and the sessions billed
    last (:data:`MAX_SESSIONS`); thread-safe."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self.totals = SessionLedger("*", max_models=MAX_MODELS_IN_TOTAL)
        #: Lines of the ledger file read back that were not records.
        self.skipped = 0
        self._sessions: OrderedDict[str, SessionLedger] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def read(cls, *paths: str) -> FileLedger:
        """The ledger the files at ``paths`` hold (several: one per replica), each read
        as a stream into the ledger's sums (:func:`.archive.read_into`)."""
        ledger = cls()
        for path in paths:
            read_into(ledger, path)
        return ledger

    def replay(self, record: Mapping[str, Any]) -> None:
        """Add one ledger file line (counted as skipped if it is not an answer's)."""
        try:
            when = read_time(record.get("time"))
            entry = None if record.get("unread") else Entry.from_record(record)
            if when is None:
                raise ValueError("an answer has a time")
        except ValueError:
            self.skipped += 1
            return
        session = read_text(record.get("session"))
        with self._lock:
            ledger = self._ledger_of(session)
            ledger.add(entry, when)
            self.totals.add(entry, when)

    def sums(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The state of the totals, and of every session's ledger, the least recently
        billed first (the order :meth:`restore` takes them back in)."""
        with self._lock:
            return self.totals.state(), [ledger.state() for ledger in self._sessions.values()]

    def restore(self, state: object, *, totals: bool = False) -> None:
        """Add a ledger's ``state`` (what :meth:`sums` listed, read back) to the
        :attr:`totals`, or to its session's ledger, then the most recently billed
        (:class:`ValueError` if ``state`` is not a ledger's)."""
        if not isinstance(state, Mapping):
            raise ValueError("a ledger's state is a mapping")
        with self._lock:
            if totals:
                self.totals.merge(SessionLedger.from_state(state, max_models=MAX_MODELS_IN_TOTAL))
                return
            sums = SessionLedger.from_state(state)
            ledger = self._sessions.pop(sums.session, None)
            if ledger is not None:
                ledger.merge(sums)
            self._sessions[sums.session] = sums if ledger is None else ledger
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)

    def _ledger_of(self, session: str | None) -> SessionLedger:
        """The session's ledger, as the most recently billed (a throwaway one for
        ``None``); the least recently billed forgotten past :attr:`max_sessions`."""
        if session is None:
            return SessionLedger("")
        ledger = self._sessions.pop(session, SessionLedger(session))
        self._sessions[session] = ledger
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return ledger

    def session(self, session: str) -> dict[str, Any] | None:
        """The ledger of ``session`` as JSON, or ``None`` if it was never billed (or was
        forgotten)."""
        with self._lock:
            ledger = self._sessions.get(name(session))
            return None if ledger is None else ledger.as_dict()

    def total(self) -> dict[str, Any]:
        """Every answer billed, together, and how many sessions the ledger holds."""
        with self._lock:
            return {**self.totals.as_dict(), "sessions": len(self._sessions)}

    def recent(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The ledgers of the sessions billed most recently first (``limit`` at most)."""
        with self._lock:
            latest = list(reversed(self._sessions.values()))
            return [ledger.as_dict() for ledger in latest[:limit]]
