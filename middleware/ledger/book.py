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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from middleware.formats.base import Codec
from middleware.ledger.archive import rotate
from middleware.ledger.checks import MAX_DOLLARS, MAX_TOKENS, name
from middleware.ledger.entry import Entry
from middleware.ledger.estimate import (
    Footprint,
    expected_read,
    tokens_per_char,
    without_middleware,
)
from middleware.ledger.files import FileLedger
from middleware.ledger.journal import CLOSE_SECONDS, Journal
from middleware.ledger.lines import check_regular
from middleware.ledger.prices import LedgerSettings
from middleware.ledger.sums import MAX_MODELS_IN_TOTAL, MAX_SESSIONS, SessionLedger
from middleware.ledger.usage import Usage, codec_of
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
    #: The prompt tokens of the session's last answer: the request a read-back in the next
    #: one repeated (it read that back instead of going on).
    last_prompt: int = 0


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
        fmt: Codec | str,
        usage: Usage | None,
        model: str | None,
        settings: LedgerSettings,
        *,
        footprints: tuple[Footprint, Footprint] | None = None,
        body_chars: int = 0,
        now: float | None = None,
        beside: bool = False,
        who: Caller | None = None,
        observed: bool = False,
        refused: str | None = None,
        readbacks: Sequence[int] = (),
    ) -> Entry | None:
        """Bill one answer of ``session`` (``None``: in the totals only; ``usage``
        ``None``: its usage was not read).

        :param fmt: the answer's wire format: its codec, or its name.
        :param footprints: the request unprocessed (repaired only, if it was ``refused``)
            and cleaned (``None``: forwarded as it came, so it would have cost what it was
            billed).
        :param beside: a call beside the session's history (an embedding): the next
            request is compared with the one before it, not with this one.
        :param who: the answer's id, who asked and how the request is tagged, and the
            console's record of the request.
        :param observed: the request went as it came (observe mode), and ``footprints``
            say what the steps would have made of it: the bill is the request's own, and
            what its cleaned request would have cost is projected from it.
        :param refused: the provider's refusal the request as it came would have met.
        :param readbacks: the characters of each result in the request that read back
            what the proxy hid (:mod:`middleware.conversations.readbacks`).
        """
        now = self.clock() if now is None else now
        codec = codec_of(fmt)
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
                writes = codec.cache_writes_billed
                before = state.before
                # Nothing is expected from a cache the lifetime says has expired.
                warm = still_cached(settings.cache_lifetime_seconds, state.last, now)
                projected = None
                if footprints is not None and observed:
                    # The request went as it came: what the steps would have sent instead
                    # is estimated from its bill, as an unprocessed one is from a cleaned.
                    projected = without_middleware(
                        usage, writes=writes, raw=footprints[1], cleaned=footprints[0],
                        before=None if before is None else (before[1], before[0]),
                        body_chars=body_chars,
                    )  # fmt: skip
                elif footprints is not None:
                    without = without_middleware(
                        usage, writes=writes, raw=footprints[0],
                        cleaned=footprints[1], before=before, body_chars=body_chars,
                        warm=warm and state.read_cache,
                    )  # fmt: skip
                sent = footprints[0] if observed and footprints is not None else None
                if footprints is not None and before is not None:
                    expected = expected_read(
                        usage, writes=writes, cleaned=sent or footprints[1],
                        before=(before[0] if sent else before[1]) if warm else None,
                        body_chars=body_chars,
                    )  # fmt: skip
                read_back = _read_back(usage, writes, readbacks, state.last_prompt, body_chars)
                found = settings.entry(model)
                priced = None if found is None else _priced(found, usage, without)
                extra = None
                if found is not None and priced is not None:
                    extra = _priced(found, projected or usage, read_back)
                entry = Entry(
                    model,
                    None if priced is None or found is None else name(found[0]),
                    usage,
                    without,
                    None if priced is None else priced[0],
                    None if priced is None else priced[1],
                    expected if expected is None or expected <= MAX_TOKENS else None,
                    observed=observed,
                    projected=projected,
                    dollars_projected=None if extra is None or projected is None else extra[0],
                    refused=refused,
                    readbacks=len(readbacks),
                    readback_tokens=read_back.prompt,
                    dollars_readback=None if extra is None else extra[1],
                )
                state.read_cache = state.read_cache or usage.cache_read > 0
                state.last_prompt = usage.prompt
            if not beside:
                state.before = footprints
            state.last = now
        key = answer_key(
            codec.provider.name, who.response_id,
            self.records.replica, self._started, next(self._count), session, now, who.request,
        )  # fmt: skip
        row = answer_row(key, now=now, session=session, fmt=codec.name, entry=entry, model=model,
                   replica=self.records.replica, who=who)  # fmt: skip
        self.records.put(row)
        if self.journal is not None:
            line = {"time": now, "session": session, "format": codec.name, "key": key}
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


def answer_row(
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
        expected_read=entry.expected_read, observed=entry.observed,
        projected={} if entry.projected is None else entry.projected.as_dict(),
        dollars_projected=entry.dollars_projected, refused=entry.refused,
        readbacks=entry.readbacks, readback_tokens=entry.readback_tokens,
        dollars_readback=entry.dollars_readback, **common,
    )  # fmt: skip


def _read_back(
    billed: Usage, writes: bool, readbacks: Sequence[int], repeated: int, body_chars: int
) -> Usage:
    """What reading back what the proxy hid cost, as simulate charges a forced re-read
    (:func:`middleware.replay.costs.readback_cost`): one more request, the one before
    (``repeated`` prompt tokens) read from the cache again, and each result read back
    written to it (``readbacks``: their characters, at the tokens per character the
    provider counted for this request)."""
    if not readbacks:
        return Usage()
    per_char = tokens_per_char(billed, body_chars)
    results = round(per_char * sum(readbacks))
    if writes:
        return Usage(cache_read=repeated, cache_write_5m=results)
    return Usage(input=results, cache_read=repeated)


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
