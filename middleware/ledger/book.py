"""The ledger: per session and in total, the tokens billed, their price, and the estimate
of what the same requests would have cost without the middleware."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from middleware.formats import get_codec
from middleware.ledger.estimate import Footprint, expected_read, without_middleware
from middleware.ledger.journal import Journal, read_journal
from middleware.ledger.prices import LedgerSettings
from middleware.ledger.usage import Usage
from middleware.session.cold_cache import still_cached

#: Sessions whose ledger is kept, at most (the least recently billed are forgotten first;
#: the totals keep every request).
MAX_SESSIONS = 10_000


@dataclass(frozen=True)
class Entry:
    """One answer's bill: tokens billed and estimated without the middleware, and their
    prices (``None`` for a model the price table does not name)."""

    model: str | None
    #: The ``ledger.prices`` key that priced it (``None``: unpriced).
    priced_as: str | None
    billed: Usage
    without: Usage
    dollars: float | None
    dollars_without: float | None
    #: Tokens the cost model expected the request to read from the cache (``None``: it
    #: could not tell: the first request seen of the session, or one sent as it came).
    expected_read: int | None = None

    def record(self) -> dict[str, Any]:
        """The entry as a ledger file line holds it (beside its time and session)."""
        return {
            "model": self.model,
            "priced_as": self.priced_as,
            "billed": self.billed.as_dict(),
            "without": self.without.as_dict(),
            "dollars": self.dollars,
            "dollars_without": self.dollars_without,
            "expected_read": self.expected_read,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Entry:
        """The entry a ledger file line holds (:class:`ValueError` if it holds none)."""
        try:
            return cls(
                _text(record.get("model")),
                _text(record.get("priced_as")),
                _usage(record["billed"]),
                _usage(record["without"]),
                _amount(record.get("dollars")),
                _amount(record.get("dollars_without")),
                _count(record.get("expected_read")),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a ledger entry: {exc}") from exc


@dataclass
class SessionLedger:
    """What one session (or, as ``"*"``, every session) was billed."""

    session: str
    requests: int = 0
    #: Answers that reported no usage the ledger could read (an error, a stream cut off,
    #: a compressed answer in an encoding it does not read).
    unread: int = 0
    #: Answers of a model the price table does not name (counted in tokens only).
    unpriced: int = 0
    billed: Usage = field(default_factory=Usage)
    without: Usage = field(default_factory=Usage)
    dollars: float = 0.0
    dollars_without: float = 0.0
    models: dict[str, int] = field(default_factory=dict)
    first: float | None = None
    last: float | None = None
    #: Cache reads the cost model expected, and those the provider reported, over the
    #: requests it could tell (calibration: a provider that caches nothing, or for less
    #: long, or a miss after a rewrite shows as a shortfall).
    expected_read: int = 0
    read_when_expected: int = 0
    #: The previous request, unprocessed and cleaned (the estimate compares with it).
    before: tuple[Footprint, Footprint] | None = field(default=None, repr=False)

    def add(self, entry: Entry | None, now: float) -> None:
        self.requests += 1
        self.first = now if self.first is None else self.first
        self.last = now
        if entry is None:
            self.unread += 1
            return
        self.billed += entry.billed
        self.without += entry.without
        if entry.expected_read is not None:
            self.expected_read += entry.expected_read
            self.read_when_expected += entry.billed.cache_read
        if entry.model:
            self.models[entry.model] = self.models.get(entry.model, 0) + 1
        if entry.dollars is None or entry.dollars_without is None:
            self.unpriced += 1
        else:
            self.dollars += entry.dollars
            self.dollars_without += entry.dollars_without

    def as_dict(self) -> dict[str, Any]:
        """The ledger as JSON: ``saved`` is the estimate without less the bill."""
        return {
            "session": self.session,
            "requests": self.requests,
            "unread": self.unread,
            "unpriced": self.unpriced,
            "billed": {**self.billed.as_dict(), "dollars": round(self.dollars, 6)},
            "without": {**self.without.as_dict(), "dollars": round(self.dollars_without, 6)},
            "saved_dollars": round(self.dollars_without - self.dollars, 6),
            "ratio": round(self.dollars / self.dollars_without, 4)
            if self.dollars_without
            else None,
            "models": dict(sorted(self.models.items())),
            "cache": {
                "expected_read": self.expected_read,
                "read": self.read_when_expected,
                "shortfall": max(0, self.expected_read - self.read_when_expected),
            },
            "first": self.first,
            "last": self.last,
        }


class Ledger:
    """Thread-safe ledgers of the sessions billed lately, and the totals; with a
    ``journal``, each answer billed is also written down."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, journal: Journal | None = None) -> None:
        self.max_sessions = max_sessions
        self.journal = journal
        #: The wall clock answers are billed by (a test's own, to make time pass).
        self.clock: Callable[[], float] = time.time
        self.totals = SessionLedger("*")
        #: Lines of the ledger file read back that were not records.
        self.skipped = 0
        self._sessions: OrderedDict[str, SessionLedger] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def open(cls, settings: LedgerSettings) -> Ledger:
        """The ledger ``settings`` ask for: with ``ledger.file``, the answers it holds
        read back first, and each new one written to it."""
        if settings.file is None:
            return cls()
        ledger = cls.read(settings.file)
        ledger.journal = Journal(settings.file)
        return ledger

    @classmethod
    def read(cls, *paths: str) -> Ledger:
        """The ledger the files at ``paths`` hold (several: one per replica)."""
        ledger = cls()
        for path in paths:
            reading = read_journal(path)
            ledger.skipped += reading.skipped
            for record in reading.records:
                ledger.replay(record)
        return ledger

    def replay(self, record: dict[str, Any]) -> None:
        """Add one ledger file line (counted as skipped if it is not an answer's)."""
        try:
            entry = None if record.get("unread") else Entry.from_record(record)
        except ValueError:
            self.skipped += 1
            return
        session = record.get("session")
        with self._lock:
            ledger = self._ledger_of(session if isinstance(session, str) else None)
            ledger.add(entry, float(record["time"]))
            self.totals.add(entry, float(record["time"]))

    def close(self) -> None:
        """Write what the journal still holds."""
        if self.journal is not None:
            self.journal.close()

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
    ) -> Entry | None:
        """Bill one answer of ``session`` (``None``: in the totals only; ``usage``
        ``None``: its usage was not read).

        :param footprints: the request unprocessed and cleaned (``None``: forwarded as
            it came, so it would have cost what it was billed).
        """
        now = self.clock() if now is None else now
        with self._lock:
            ledger = self._ledger_of(session)
            entry = None
            if usage is not None:
                without, expected = usage, None
                writes = get_codec(fmt).cache_writes_billed
                before = ledger.before
                if footprints is not None:
                    without = without_middleware(
                        usage, writes=writes, raw=footprints[0],
                        cleaned=footprints[1], before=before, body_chars=body_chars,
                    )  # fmt: skip
                if footprints is not None and before is not None:
                    # Nothing is expected from a cache the lifetime says has expired.
                    warm = still_cached(settings.cache_lifetime_seconds, ledger.last, now)
                    expected = expected_read(
                        usage, writes=writes, cleaned=footprints[1],
                        before=before[1] if warm else None, body_chars=body_chars,
                    )  # fmt: skip
                found = settings.entry(model)
                entry = Entry(
                    model,
                    None if found is None else found[0],
                    usage,
                    without,
                    None if found is None else found[1].dollars(usage),
                    None if found is None else found[1].dollars(without),
                    expected,
                )
            ledger.before = footprints
            ledger.add(entry, now)
            self.totals.add(entry, now)
        if self.journal is not None:
            line = {"time": now, "session": session, "format": fmt}
            self.journal.write({**line, **entry.record()} if entry else {**line, "unread": True})
        return entry

    def session(self, session: str) -> dict[str, Any] | None:
        """The ledger of ``session`` as JSON, or ``None`` if it was never billed (or was
        forgotten)."""
        with self._lock:
            ledger = self._sessions.get(session)
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


def _usage(value: Any) -> Usage:
    if not isinstance(value, dict):
        raise TypeError("tokens are a mapping of kinds")
    counts = {kind: value.get(kind, 0) for kind in Usage().as_dict()}
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts.values()):
        raise TypeError("token counts are whole numbers")
    return Usage(**counts)


def _amount(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("dollars are a number")
    return float(value)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError("a token count is a whole number")
    return value
