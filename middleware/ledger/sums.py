"""A session's or the totals' running sums (:class:`SessionLedger`): one answer's bill
(:class:`~.entry.Entry`) added, another replica's merged, kept as a sums record or read
from a row of the records database."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from middleware.ledger.checks import (
    KINDS,
    MAX_DOLLARS,
    MAX_NAME_CHARS,
    MAX_TOKENS,
    name,
    read_text,
    read_time,
    total,
    usage,
    whole,
)
from middleware.ledger.entry import Entry
from middleware.ledger.usage import Usage
from middleware.records.tables import SUMS_ADDED_IN_2 as _ADDED

# The names read from here before the bill and the checks had modules of their own.
__all__ = [
    "MAX_DOLLARS",
    "MAX_MODELS",
    "MAX_MODELS_IN_TOTAL",
    "MAX_NAME_CHARS",
    "MAX_SESSIONS",
    "MAX_TOKENS",
    "OTHER_MODELS",
    "Entry",
    "SessionLedger",
    "name",
    "read_text",
    "read_time",
]

#: Sessions whose ledger is kept, at most (the least recently billed are forgotten first;
#: the totals keep every request).
MAX_SESSIONS = 10_000
#: Models counted by name in one session's ledger, and in the totals; the answers of
#: models past them are counted under :data:`OTHER_MODELS` (an upstream may name a new
#: model in every answer).
MAX_MODELS = 8
MAX_MODELS_IN_TOTAL = 64
OTHER_MODELS = "(other models)"


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
                requests=whole(state["requests"]),
                unread=whole(state.get("unread", 0)),
                unpriced=whole(state.get("unpriced", 0)),
                billed=usage(state["billed"]),
                without=usage(state["without"]),
                dollars=total(state["dollars"]),
                dollars_without=total(state["dollars_without"]),
                first=read_time(state.get("first")),
                last=read_time(state.get("last")),
                expected_read=whole(state.get("expected_read", 0)),
                read_when_expected=whole(state.get("read_when_expected", 0)),
                max_models=max_models,
            )
            for counted in _ADDED:
                read = total if counted.startswith("dollars") else whole
                setattr(ledger, counted, read(state.get(counted, 0)))
            for model, answers in models.items():
                ledger.count_model(name(model), whole(answers))
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
            billed=Usage(*(int(row[f"billed_{kind}"] or 0) for kind in KINDS)),
            without=Usage(*(int(row[f"without_{kind}"] or 0) for kind in KINDS)),
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
