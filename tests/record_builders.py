"""Rows for the records tests: an answer with a bill, as a replica would write it; records
in memory or in a file of the test's own."""

from __future__ import annotations

from pathlib import Path

from middleware.records import Records, RecordSettings
from middleware.records.rows import AnswerRow


def answer(key: str, session: str | None = "s1", **fields: object) -> AnswerRow:
    """An answer of ``session`` billed 10 + 5 tokens (100 read from the cache), 30 + 5
    (300) without the middleware, at $0.01 against $0.03; ``fields`` change any of it."""
    values: dict[str, object] = {
        "time": 1_700_000_000.0,
        "session": session,
        "replica": "r1",
        "format": "anthropic",
        "billed": {"input": 10, "output": 5, "cache_read": 100},
        "without": {"input": 30, "output": 5, "cache_read": 300},
        "model": "claude-x",
        "dollars": 0.01,
        "dollars_without": 0.03,
    }
    values.update(fields)
    return AnswerRow(key, **values)  # type: ignore[arg-type]


def records_in(path: Path | None = None, replica: str = "r1") -> Records:
    """Records in memory, or in the SQLite file at ``path`` (what a restart finds)."""
    if path is None:
        return Records.in_memory(replica)
    settings = RecordSettings(f"sqlite:///{path}", 64 * 1024 * 1024, None, None, replica)
    return Records.open(settings, replica=replica)
