"""One answer's bill (:class:`Entry`): what the ledger adds to a session's sums and writes
to the ledger file as a line, read back through :mod:`.checks`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from middleware.ledger.checks import (
    MAX_DOLLARS,
    MAX_TOKENS,
    amount,
    count,
    read_text,
    usage,
    whole,
)
from middleware.ledger.usage import Usage


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
                usage(record["billed"], MAX_TOKENS),
                usage(record["without"], MAX_TOKENS),
                amount(record.get("dollars"), MAX_DOLLARS),
                amount(record.get("dollars_without"), MAX_DOLLARS),
                count(record.get("expected_read"), MAX_TOKENS),
                record.get("observed") is True,
                None if record.get("projected") is None else usage(record["projected"], MAX_TOKENS),
                amount(record.get("dollars_projected"), MAX_DOLLARS),
                read_text(record.get("refused")),
                whole(record.get("readbacks", 0), MAX_TOKENS),
                whole(record.get("readback_tokens", 0), MAX_TOKENS),
                amount(record.get("dollars_readback"), MAX_DOLLARS),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a ledger entry: {exc}") from exc
