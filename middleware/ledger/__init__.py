"""What requests cost: the ``usage`` a provider reports in each answer, priced, beside an
estimate of what the same requests would have cost without the middleware."""

from middleware.ledger.book import Caller, Ledger
from middleware.ledger.entry import Entry
from middleware.ledger.estimate import Footprint, footprint
from middleware.ledger.files import FileLedger
from middleware.ledger.prices import LedgerSettings, ModelPrices
from middleware.ledger.sums import SessionLedger
from middleware.ledger.usage import Usage, UsageReader, read_usage

__all__ = [
    "Caller",
    "Entry",
    "FileLedger",
    "Footprint",
    "Ledger",
    "LedgerSettings",
    "ModelPrices",
    "SessionLedger",
    "Usage",
    "UsageReader",
    "footprint",
    "read_usage",
]
