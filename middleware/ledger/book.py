"""The ledger: per session and in total, the tokens billed, their price, and the estimate
of what the same requests would have cost without the middleware."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from middleware.ledger.estimate import Footprint, without_middleware
from middleware.ledger.prices import LedgerSettings
from middleware.ledger.usage import Usage

#: Sessions whose ledger is kept, at most (the least recently billed are forgotten first;
#: the totals keep every request).
MAX_SESSIONS = 10_000
#: Wire formats whose provider bills cache writes.
WRITES_BILLED = frozenset({"anthropic"})


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
            "first": self.first,
            "last": self.last,
        }


class Ledger:
    """Thread-safe ledgers of the sessions billed lately, and the totals."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self.totals = SessionLedger("*")
        self._sessions: OrderedDict[str, SessionLedger] = OrderedDict()
        self._lock = threading.Lock()

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
        now = time.time() if now is None else now
        with self._lock:
            ledger = SessionLedger("")
            if session is not None:
                ledger = self._sessions.pop(session, SessionLedger(session))
                self._sessions[session] = ledger
                while len(self._sessions) > self.max_sessions:
                    self._sessions.popitem(last=False)
            entry = None
            if usage is not None:
                without = usage
                if footprints is not None:
                    without = without_middleware(
                        usage, writes=fmt in WRITES_BILLED, raw=footprints[0],
                        cleaned=footprints[1], before=ledger.before, body_chars=body_chars,
                    )  # fmt: skip
                found = settings.entry(model)
                entry = Entry(
                    model,
                    None if found is None else found[0],
                    usage,
                    without,
                    None if found is None else found[1].dollars(usage),
                    None if found is None else found[1].dollars(without),
                )
            ledger.before = footprints
            ledger.add(entry, now)
            self.totals.add(entry, now)
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
