"""Rows for the records tests: an answer with a bill, as a replica would write it."""

from __future__ import annotations

from middleware.records.rows import AnswerRow


def answer(key: str, session: str | None = "s1", **fields: object) -> AnswerRow:
    """An answer of ``session`` billed 10 + 5 tokens (100 read from the cache), 30 + 5
    (300) without the middleware, at $0.01 against $0.03; ``fields`` change any of it."""
    values: dict[str, object] = {
        "time": 1_700_000_000.0, "session": session, "replica": "r1", "format": "anthropic",
        "billed": {"input": 10, "output": 5, "cache_read": 100},
        "without": {"input": 30, "output": 5, "cache_read": 300},
        "model": "claude-x", "dollars": 0.01, "dollars_without": 0.03,
    }  # fmt: skip
    values.update(fields)
    return AnswerRow(key, **values)  # type: ignore[arg-type]
