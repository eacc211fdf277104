"""The sums a ledger keeps: one answer's bill (:class:`Entry`), a session's or the totals'
running sums (:class:`SessionLedger`), and the checks a name, a count or an amount read
back passes (from a ledger file line, or a row of the records database)."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from middleware.ledger.usage import Usage
from middleware.records.tables import SUMS_ADDED_IN_2 as _ADDED

logger = logging.getLogger(__name__)

#: Sessions whose ledger is kept, at most (the least recently billed are forgotten first;
#: the totals keep every request).
MAX_SESSIONS = 10_000
#: Characters kept of a name the ledger keeps (a session, a model, a price key): clients
#: and upstreams choose them, so a longer one is cut (as session ids are:
#: :data:`middleware.conversations.keys.MAX_ID_CHARS`).
MAX_NAME_CHARS = 256
#: Models counted by name in one session's ledger, and in the totals; the answers of
#: models past them are counted under :data:`OTHER_MODELS` (an upstream may name a new
#: model in every answer).
MAX_MODELS = 8
MAX_MODELS_IN_TOTAL = 64
OTHER_MODELS = "(other models)"
#: Tokens of one kind one answer may be billed: no context window comes near, so a usage
#: reporting more is not a bill (it is counted as unread), and every sum stays a number
#: JSON and floats can hold.
MAX_TOKENS = 10**12
#: US dollars one answer may cost: a price that makes more (or no finite number) is a
#: mistake in ``ledger.prices``, and the answer is counted in tokens only.
MAX_DOLLARS = 1e9

_SURROGATE = re.compile("[\ud800-\udfff]")
#: The kinds of tokens, in the order :class:`Usage` takes them.
_KINDS = tuple(Usage().as_dict())


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
    #: Forwarded as it came (observe mode): ``without`` is the bill, and ``projected``
    #: what the cleaned request would have been billed (``None``: not projected).
    observed: bool = False
    projected: Usage | None = None
    dollars_projected: float | None = None
    #: The provider's refusal the request as it came would have met: a repair spared it,
    #: and ``without`` is the repaired request's (a refused request costs nothing).
    refused: str | None = None
    #: What the agent went back for in this request (read-backs), their tokens, and what
    #: they cost (``None``: not priced).
    readbacks: int = 0
    readback_tokens: int = 0
    dollars_readback: float | None = None

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
            "observed": self.observed,
            "projected": None if self.projected is None else self.projected.as_dict(),
            "dollars_projected": self.dollars_projected,
            "refused": self.refused,
            "readbacks": self.readbacks,
            "readback_tokens": self.readback_tokens,
            "dollars_readback": self.dollars_readback,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Entry:
        """The entry a ledger file line holds (:class:`ValueError` if it holds none)."""
        try:
            return cls(
                read_text(record.get("model")),
                read_text(record.get("priced_as")),
                _usage(record["billed"], MAX_TOKENS),
                _usage(record["without"], MAX_TOKENS),
                _amount(record.get("dollars"), MAX_DOLLARS),
                _amount(record.get("dollars_without"), MAX_DOLLARS),
                _count(record.get("expected_read"), MAX_TOKENS),
                record.get("observed") is True,
                None
                if record.get("projected") is None
                else _usage(record["projected"], MAX_TOKENS),
                _amount(record.get("dollars_projected"), MAX_DOLLARS),
                read_text(record.get("refused")),
                _whole(record.get("readbacks", 0), MAX_TOKENS),
                _whole(record.get("readback_tokens", 0), MAX_TOKENS),
                _amount(record.get("dollars_readback"), MAX_DOLLARS),
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
    #: Answers to requests forwarded as they came (observe mode), those of them projected
    #: (what their cleaned requests would have been billed estimated), and, over those
    #: projected and priced, their bill and the projection's.
    observed: int = 0
    projected: int = 0
    dollars_observed: float = 0.0
    dollars_projected: float = 0.0
    #: Answers to requests the provider would have refused as they came (repairs).
    refused: int = 0
    #: Read-backs (what the proxy hid, gone back for), their tokens and their price.
    readbacks: int = 0
    readback_tokens: int = 0
    dollars_readback: float = 0.0
    #: Models counted by name (:data:`MAX_MODELS`; the totals: :data:`MAX_MODELS_IN_TOTAL`).
    max_models: int = field(default=MAX_MODELS, repr=False)

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
            self.count_model(entry.model, 1)
        self.observed += entry.observed
        self.projected += entry.observed and entry.projected is not None
        self.refused += entry.refused is not None
        self.readbacks += entry.readbacks
        self.readback_tokens += entry.readback_tokens
        if entry.dollars is None or entry.dollars_without is None:
            self.unpriced += 1
            return
        self.dollars += entry.dollars
        self.dollars_without += entry.dollars_without
        self.dollars_readback += entry.dollars_readback or 0.0
        if entry.observed and entry.dollars_projected is not None:
            self.dollars_observed += entry.dollars
            self.dollars_projected += entry.dollars_projected

    def merge(self, other: SessionLedger) -> None:
        """Add ``other``'s counts (the same session's, or the totals, from another
        replica's ledger file)."""
        self.requests += other.requests
        self.unread += other.unread
        self.unpriced += other.unpriced
        self.billed += other.billed
        self.without += other.without
        self.dollars += other.dollars
        self.dollars_without += other.dollars_without
        self.expected_read += other.expected_read
        self.read_when_expected += other.read_when_expected
        for counted in _ADDED:
            setattr(self, counted, getattr(self, counted) + getattr(other, counted))
        for model, answers in other.models.items():
            self.count_model(model, answers)
        times = [t for t in (self.first, self.last, other.first, other.last) if t is not None]
        self.first = min(times, default=None)
        self.last = max(times, default=None)

    def count_model(self, model: str, answers: int) -> None:
        """Count ``answers`` of ``model``, under :data:`OTHER_MODELS` once the ledger
        counts as many models as it may by name."""
        if model not in self.models and len(self.models) >= self.max_models - 1:
            model = OTHER_MODELS
        self.models[model] = self.models.get(model, 0) + answers

    def state(self) -> dict[str, Any]:
        """Every count as it is (the ledger file's sums keep it: :mod:`.archive`)."""
        return {
            "session": self.session,
            "requests": self.requests,
            "unread": self.unread,
            "unpriced": self.unpriced,
            "billed": self.billed.as_dict(),
            "without": self.without.as_dict(),
            "dollars": self.dollars,
            "dollars_without": self.dollars_without,
            "models": dict(self.models),
            "first": self.first,
            "last": self.last,
            "expected_read": self.expected_read,
            "read_when_expected": self.read_when_expected,
            **{counted: getattr(self, counted) for counted in _ADDED},
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any], *, max_models: int = MAX_MODELS) -> SessionLedger:
        """The ledger :meth:`state` wrote (:class:`ValueError` if ``state`` is not one:
        a count not a whole number, an amount not finite, a name not text)."""
        try:
            session = read_text(state["session"])
            models = state.get("models", {})
            if session is None or not isinstance(models, dict):
                raise TypeError("a session is named, its models are a mapping")
            ledger = cls(
                session,
                requests=_whole(state["requests"]),
                unread=_whole(state.get("unread", 0)),
                unpriced=_whole(state.get("unpriced", 0)),
                billed=_usage(state["billed"]),
                without=_usage(state["without"]),
                dollars=_total(state["dollars"]),
                dollars_without=_total(state["dollars_without"]),
                first=read_time(state.get("first")),
                last=read_time(state.get("last")),
                expected_read=_whole(state.get("expected_read", 0)),
                read_when_expected=_whole(state.get("read_when_expected", 0)),
                max_models=max_models,
            )
            for counted in _ADDED:
                read = _total if counted.startswith("dollars") else _whole
                setattr(ledger, counted, read(state.get(counted, 0)))
            for model, answers in models.items():
                ledger.count_model(name(model), _whole(answers))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a session's sums: {exc}") from exc
        return ledger

    @classmethod
    def from_row(cls, row: Mapping[str, Any], *, max_models: int = MAX_MODELS) -> SessionLedger:
        """The sums a row of the records holds (a session's, the totals, a group's),
        naming ``max_models`` models at most (the others counted together)."""
        models = row.get("models") or {}
        ledger = cls(
            row["session"] or "",
            requests=int(row["answers"] or 0),
            unread=int(row["unread"] or 0),
            unpriced=int(row["unpriced"] or 0),
            billed=Usage(*(int(row[f"billed_{kind}"] or 0) for kind in _KINDS)),
            without=Usage(*(int(row[f"without_{kind}"] or 0) for kind in _KINDS)),
            dollars=float(row["dollars"] or 0.0),
            dollars_without=float(row["dollars_without"] or 0.0),
            first=row.get("first"),
            last=row.get("last"),
            expected_read=int(row["expected_read"] or 0),
            read_when_expected=int(row["read_when_expected"] or 0),
            max_models=max_models,
        )
        for counted in _ADDED:
            kind = float if counted.startswith("dollars") else int
            setattr(ledger, counted, kind(row.get(counted) or 0))
        for model, answers in sorted(models.items(), key=lambda item: -item[1]):
            ledger.count_model(model, answers)
        return ledger

    @property
    def ratio(self) -> float | None:
        """The bill over the estimate without (``None``: no estimate, or one so small
        that the ratio is no finite number)."""
        if not self.dollars_without:
            return None
        ratio = self.dollars / self.dollars_without
        return round(ratio, 4) if math.isfinite(ratio) else None

    def as_dict(self) -> dict[str, Any]:
        """The ledger as JSON: ``saved`` is the estimate without less the bill (a request
        a repair spared a refusal compared with the repaired request: ``refused`` counts
        them), ``effective_saved`` that less what the read-backs cost, ``observe`` what
        the requests forwarded as they came would have saved cleaned."""
        saved = self.dollars_without - self.dollars
        return {
            "session": self.session,
            "requests": self.requests,
            "unread": self.unread,
            "unpriced": self.unpriced,
            # Answers read and priced: with none, a page says "not priced", never $0.
            "priced": self.requests - self.unread - self.unpriced,
            "billed": {**self.billed.as_dict(), "dollars": round(self.dollars, 6)},
            "without": {**self.without.as_dict(), "dollars": round(self.dollars_without, 6)},
            "saved_dollars": round(saved, 6),
            "effective_saved_dollars": round(saved - self.dollars_readback, 6),
            "refused": self.refused,
            "readbacks": {
                "count": self.readbacks,
                "tokens": self.readback_tokens,
                "dollars": round(self.dollars_readback, 6),
            },
            "observe": {
                "answers": self.observed,
                "projected": self.projected,
                "billed_dollars": round(self.dollars_observed, 6),
                "would_have_dollars": round(self.dollars_projected, 6),
                "would_have_saved_dollars": round(
                    self.dollars_observed - self.dollars_projected, 6
                ),
            },
            "ratio": self.ratio,
            "models": dict(sorted(self.models.items())),
            "cache": {
                "expected_read": self.expected_read,
                "read": self.read_when_expected,
                "shortfall": max(0, self.expected_read - self.read_when_expected),
            },
            "first": self.first,
            "last": self.last,
        }


def name(value: str) -> str:
    """``value`` as the ledger keeps a name: valid Unicode (a lone surrogate, which no
    JSON answer or UTF-8 file can hold, becomes U+FFFD) of :data:`MAX_NAME_CHARS` at most."""
    if len(value) <= MAX_NAME_CHARS and (value.isascii() or not _SURROGATE.search(value)):
        return value  # as most are: read back a line at a time, each name is checked
    return _SURROGATE.sub("\ufffd", value[:MAX_NAME_CHARS])


def _usage(value: Any, most: int | None = None) -> Usage:
    if not isinstance(value, dict):
        raise TypeError("tokens are a mapping of kinds")
    counts = [value.get(kind, 0) for kind in _KINDS]
    for count in counts:
        _whole(count, most)
    return Usage(*counts)


def _whole(value: Any, most: int | None = None) -> int:
    if type(value) is not int or value < 0:  # not a bool either
        raise TypeError("counts are whole numbers")
    if most is not None and value > most:
        raise TypeError(f"a count past {most:,} is out of range")
    return value


def _amount(value: Any, most: float) -> float | None:
    if value is None:
        return None
    amount = _total(value)
    if amount > most:
        raise TypeError(f"an amount of {amount:.3g} dollars is out of range")
    return amount


def _total(value: Any) -> float:
    """A sum of dollars: a finite number, not negative."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("dollars are a number")
    try:
        amount = float(value)
    except OverflowError as exc:
        raise TypeError("dollars are a finite number") from exc
    if not math.isfinite(amount) or amount < 0:
        raise TypeError("dollars are a finite number, not negative")
    return amount


def read_time(value: Any) -> float | None:
    """A time of the ledger file (seconds since the epoch), ``None`` if it is none."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        when = float(value)
    except OverflowError:
        return None
    return when if math.isfinite(when) else None


def read_text(value: Any) -> str | None:
    return name(value) if isinstance(value, str) else None


def _count(value: Any, most: int) -> int | None:
    return None if value is None else _whole(value, most)
