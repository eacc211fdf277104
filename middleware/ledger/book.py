"""The ledger: each answer's bill, with the estimate of what its request would have cost
without the middleware, put in the records every replica shares, and read back per session,
in total and by who asked."""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from middleware.formats import get_codec
from middleware.ledger.archive import rotate
from middleware.ledger.estimate import Footprint, expected_read, without_middleware
from middleware.ledger.files import FileLedger
from middleware.ledger.journal import CLOSE_SECONDS, Journal, check_regular
from middleware.ledger.prices import LedgerSettings
from middleware.ledger.sums import (
    MAX_DOLLARS,
    MAX_MODELS_IN_TOTAL,
    MAX_SESSIONS,
    MAX_TOKENS,
    Entry,
    SessionLedger,
    name,
)
from middleware.ledger.usage import Usage
from middleware.records import AnswerRow, Records, answer_key, queries
from middleware.records.queries import Filters
from middleware.session.cold_cache import still_cached

logger = logging.getLogger(__name__)

#: Sessions listed when no limit is given.
MAX_LISTED = 1000


@dataclass
class _Estimating:
    """What estimating a session's next answer needs of the ones this process billed."""

    #: The previous request, unprocessed and cleaned (the estimate compares with it).
    before: tuple[Footprint, Footprint] | None = None
    last: float | None = None
    #: Whether an answer of the session read from the prompt cache.
    read_cache: bool = False


class Ledger:
    """Bills each answer into the records (:mod:`middleware.records`: every replica's
    answers, in one database) and reads the sums back; with a ``journal``, each answer is
    also written to ``ledger.file``. Thread-safe.

    The estimate of an answer without the middleware compares its request with the
    session's previous one this process saw (kept for :data:`MAX_SESSIONS` sessions):
    behind a load balancer that spreads a session, with the previous one it served."""

    def __init__(
        self, records: Records, journal: Journal | None = None, max_sessions: int = MAX_SESSIONS
    ) -> None:
        self.records = records
        self.journal = journal
        self.max_sessions = max_sessions
        #: The wall clock answers are billed by (a test's own, to make time pass).
        self.clock: Callable[[], float] = time.time
        self._estimating: OrderedDict[str, _Estimating] = OrderedDict()
        self._lock = threading.Lock()
        # What makes each answer's key this process's own (:func:`.answer_key`).
        self._started = time.time_ns()
        self._count = itertools.count()

    @classmethod
    def open(cls, settings: LedgerSettings, records: Records) -> Ledger:
        """The ledger billing into ``records``; with ``ledger.file``, each answer also
        appended to it as a JSON line (rotated past ``ledger.rotate_bytes``).

        :raises UnusableFile: ``ledger.file`` (or its sums, or a part) is no regular file.
        """
        if settings.file is None:
            return cls(records)
        check_regular(settings.file)
        journal = Journal(
            settings.file, settings.rotate_bytes, rotate=lambda path: rotate(FileLedger(), path)
        )
        return cls(records, journal)

    def record(
        self,
        session: str | None,
        fmt: str,
        usage: Usage | None,
        model: str | None,
        settings: LedgerSettings,
        *,
        footprints: tuple[Footprint, Footprint] | None = None,
        body_chars: int = 0,
        now: float | None = None,
        beside: bool = False,
        who: Caller | None = None,
    ) -> Entry | None:
        """Bill one answer of ``session`` (``None``: in the totals only; ``usage``
        ``None``: its usage was not read).

        :param footprints: the request unprocessed and cleaned (``None``: forwarded as
            it came, so it would have cost what it was billed).
        :param beside: a call beside the session's history (an embedding): the next
            request is compared with the one before it, not with this one.
        :param who: the answer's id, who asked and how the request is tagged, and the
            console's record of the request.
        """
        now = self.clock() if now is None else now
        session = None if session is None else name(session)
        model = None if model is None else name(model)
        who = who if who is not None else Caller()
        if usage is not None and max(usage.as_dict().values()) > MAX_TOKENS:
            logger.warning("an answer of session %r reports more than %d tokens of a kind: "
                           "not a bill, counted as unread", session, MAX_TOKENS)  # fmt: skip
            usage = None
        with self._lock:
            state = self._state_of(session)
            entry = None
            if usage is not None:
                without, expected = usage, None
                writes = get_codec(fmt).cache_writes_billed
                before = state.before
                # Nothing is expected from a cache the lifetime says has expired.
                warm = still_cached(settings.cache_lifetime_seconds, state.last, now)
                if footprints is not None:
                    without = without_middleware(
                        usage, writes=writes, raw=footprints[0],
                        cleaned=footprints[1], before=before, body_chars=body_chars,
                        warm=warm and state.read_cache,
                    )  # fmt: skip
                if footprints is not None and before is not None:
                    expected = expected_read(
                        usage, writes=writes, cleaned=footprints[1],
                        before=before[1] if warm else None, body_chars=body_chars,
                    )  # fmt: skip
                found = settings.entry(model)
                dollars = None if found is None else _priced(found, usage, without)
                entry = Entry(
                    model,
                    None if dollars is None or found is None else name(found[0]),
                    usage,
                    without,
                    None if dollars is None else dollars[0],
                    None if dollars is None else dollars[1],
                    expected if expected is None or expected <= MAX_TOKENS else None,
                )
                state.read_cache = state.read_cache or usage.cache_read > 0
            if not beside:
                state.before = footprints
            state.last = now
        key = answer_key(
            get_codec(fmt).provider.name, who.response_id,
            self.records.replica, self._started, next(self._count), session, now, who.request,
        )  # fmt: skip
        row = _row(key, now=now, session=session, fmt=fmt, entry=entry, model=model,
                   replica=self.records.replica, who=who)  # fmt: skip
        self.records.put(row)
        if self.journal is not None:
            line = {"time": now, "session": session, "format": fmt, "key": key}
            self.journal.write({**line, **entry.record()} if entry else {**line, "unread": True})
        return entry

    def _state_of(self, session: str | None) -> _Estimating:
        """The session's estimating state, as the most recently billed (a throwaway one
        for ``None``); the least recently billed forgotten past :attr:`max_sessions`."""
        if session is None:
            return _Estimating()
        state = self._estimating.pop(session, None) or _Estimating()
        self._estimating[session] = state
        while len(self._estimating) > self.max_sessions:
            self._estimating.popitem(last=False)
        return state

    # -- read back ------------------------------------------------------------------------

    def session(self, session: str) -> dict[str, Any] | None:
        """The ledger of ``session`` as JSON (every replica's answers), or ``None`` if
        none was billed."""
        row = queries.session(self.records.store(), name(session))
        if row is None or not row["answers"]:
            return None
        return SessionLedger.from_row(row).as_dict()

    def total(self, filters: Filters | None = None) -> dict[str, Any]:
        """Every answer billed (those ``filters`` select), together, and how many
        sessions they belong to."""
        filters = filters or Filters()
        store = self.records.store()
        row = queries.totals(store, filters)
        models = {} if filters else queries.models(store)
        totals = SessionLedger.from_row(
            {**row, "session": "*", "models": models}, max_models=MAX_MODELS_IN_TOTAL
        )
        return {**totals.as_dict(), "sessions": row["sessions"]}

    def recent(
        self, limit: int | None = None, filters: Filters | None = None
    ) -> list[dict[str, Any]]:
        """The ledgers of the sessions billed most recently first (``limit`` at most),
        their sums over the answers ``filters`` select."""
        most = MAX_LISTED if limit is None else limit
        rows = queries.recent(self.records.store(), most, filters or Filters())
        return [SessionLedger.from_row(row).as_dict() for row in rows]

    def by(self, dimension: str, filters: Filters | None = None) -> list[dict[str, Any]]:
        """The sums by ``dimension`` (``key``: by caller, ``tag``, ``agent``, ``model``,
        ``day``), the largest bill first."""
        rows = queries.by(self.records.store(), dimension, filters or Filters())
        return [
            {dimension: row["group"], **SessionLedger.from_row({**row, "session": ""}).as_dict()}
            for row in rows
        ]

    def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """Write what the journal still holds, for ``timeout`` seconds at most (the
        records are the host's to close)."""
        if self.journal is not None:
            self.journal.close(timeout)


@dataclass(frozen=True)
class Caller:
    """What the ledger records of an answer beside its bill: the provider's id of it, the
    caller (a digest of its API key, never the key), the request's tags, the agent, and
    the key of the console's record of the request."""

    response_id: str | None = None
    caller: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    agent: str | None = None
    request: str | None = None


def _row(
    key: str,
    *,
    now: float,
    session: str | None,
    fmt: str,
    entry: Entry | None,
    model: str | None,
    replica: str,
    who: Caller,
) -> AnswerRow:
    common: dict[str, Any] = {
        "request": who.request, "agent": who.agent, "caller": who.caller, "tags": who.tags,
    }  # fmt: skip
    if entry is None:
        return AnswerRow(key, now, session, replica, fmt, unread=True, model=model, **common)
    return AnswerRow(
        key, now, session, replica, fmt,
        billed=entry.billed.as_dict(), without=entry.without.as_dict(), model=entry.model,
        priced_as=entry.priced_as, dollars=entry.dollars, dollars_without=entry.dollars_without,
        expected_read=entry.expected_read, **common,
    )  # fmt: skip


def _priced(found: tuple[str, Any], usage: Usage, without: Usage) -> tuple[float, float] | None:
    """What ``usage`` and ``without`` cost at the prices ``found``, or ``None`` if that is
    no amount (``ledger.prices`` holding a price too high, or infinite: logged)."""
    key, prices = found
    try:
        dollars = prices.dollars(usage), prices.dollars(without)
    except OverflowError:
        dollars = math.inf, math.inf
    if all(0 <= amount <= MAX_DOLLARS for amount in dollars):
        return dollars
    logger.warning("ledger.prices[%r] prices an answer at more than $%g: counted in tokens "
                   "only; check that entry", key, MAX_DOLLARS)  # fmt: skip
    return None
