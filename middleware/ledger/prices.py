"""The ``ledger`` section: what each model's tokens cost, by kind."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from middleware.ledger.usage import Usage
from middleware.policy.settings import converted, section

#: Tokens a price is quoted for.
PER = 1_000_000


@dataclass(frozen=True)
class ModelPrices:
    """US dollars per million tokens of each kind (the schema's ``ledger.prices`` entry)."""

    input: float
    output: float
    cache_read: float
    cache_write_5m: float
    cache_write_1h: float

    def dollars(self, usage: Usage) -> float:
        """What ``usage`` costs at these prices."""
        return (
            usage.input * self.input
            + usage.output * self.output
            + usage.cache_read * self.cache_read
            + usage.cache_write_5m * self.cache_write_5m
            + usage.cache_write_1h * self.cache_write_1h
        ) / PER


class PriceTable(dict[str, ModelPrices]):
    """Prices by model name or glob pattern, and which entry prices each model name met
    (an answer's model is looked up once, not matched against every pattern each time)."""

    def __init__(self, entries: Mapping[str, ModelPrices]) -> None:
        super().__init__(entries)
        self._found: dict[str, tuple[str, ModelPrices] | None] = {}

    def entry(self, model: str) -> tuple[str, ModelPrices] | None:
        """The entry named ``model`` exactly, else the longest pattern matching it (the
        first in sorted order on a tie), with its key; ``None`` if none matches."""
        if model in self._found:
            return self._found[model]
        found: tuple[str, ModelPrices] | None = None
        if model in self:
            found = model, self[model]
        else:
            matching = sorted(
                p for p in self if any(c in p for c in "*?[") and fnmatchcase(model, p)
            )
            if matching:
                key = max(matching, key=len)
                found = key, self[key]
        if len(self._found) < MAX_MODELS_MET:  # model names come from clients: bounded
            self._found[model] = found
        return found


#: Model names whose price entry is remembered, at most.
MAX_MODELS_MET = 1024


def _prices(table: Mapping[str, Mapping[str, Any]]) -> PriceTable:
    return PriceTable(
        {
            name: ModelPrices(**{k: float(v) for k, v in entry.items()})
            for name, entry in table.items()
        }
    )


@section("ledger")
@dataclass(frozen=True)
class LedgerSettings:
    #: The file each billed answer is written to (``None``: kept in memory only).
    file: str | None
    #: Bytes past which the file is rotated (``None``: never; :mod:`.archive`).
    rotate_bytes: int | None
    #: How long the provider keeps a prompt prefix unread (``None``: it keeps none).
    cache_lifetime_seconds: float | None
    #: Prices by model name or glob pattern (``ledger.prices``).
    prices: PriceTable = converted(_prices)

    def entry(self, model: str | None) -> tuple[str, ModelPrices] | None:
        """The ``ledger.prices`` entry of ``model`` and its key (:meth:`PriceTable.entry`)."""
        return self.prices.entry(model) if model else None
