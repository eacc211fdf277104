"""What the proxy records, in a database: each billed answer, the console's record of each
request, and the sums they add up to, shared by every replica that names the same
database (``ledger.url``: SQLite by default, PostgreSQL for a fleet; docs/scaling.md).

:class:`~.service.Records` is the surface: rows are put without waiting and written by a
thread of their own (:mod:`.writer`, :mod:`.outbox`), each counted once by its key
(:mod:`.store`, :mod:`.batches`), and read back by :mod:`.queries` (the console's pages by
:mod:`.request_pages`).
"""

from __future__ import annotations

from middleware.records.migrations import SchemaVersionError
from middleware.records.rows import AnswerRow, RequestRow, answer_key, digest_key
from middleware.records.service import Records
from middleware.records.settings import RecordSettings
from middleware.records.store import RecordStore

__all__ = [
    "AnswerRow",
    "RecordSettings",
    "RecordStore",
    "Records",
    "RequestRow",
    "SchemaVersionError",
    "answer_key",
    "digest_key",
]
