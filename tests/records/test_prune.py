"""Retention: the console's records older than ``ledger.keep_days``, then the oldest past
``ledger.console_bytes``, are removed; the answers and every sum they added to stay."""

from __future__ import annotations

from record_builders import answer

from middleware.records import queries
from middleware.records.rows import RequestRow
from middleware.records.store import RecordStore, prune


def kept(store: RecordStore, session: str = "s1") -> list[str]:
    return [row["key"] for row in queries.requests(store, session, limit=100)][::-1]


def test_old_console_records_go_and_the_sums_stay(store: RecordStore) -> None:
    store.write(
        [answer("a1", time=100.0, request="q1"), answer("a2", time=5000.0, request="q2")],
        [
            RequestRow("q1", "s1", 100.0, "r1", b"{}", repairs=1),
            RequestRow("q2", "s1", 5000.0, "r1", b"{}", spills=1),
        ],
    )
    before = queries.session(store, "s1")
    totals = queries.totals(store)
    assert prune(store, before=1000.0, most_bytes=None) == 1
    assert kept(store) == ["q2"]
    assert queries.session(store, "s1") == before  # requests, repairs, spills, the bill
    assert queries.totals(store) == totals
    assert prune(store, before=1000.0, most_bytes=None) == 0


def test_past_the_byte_bound_the_oldest_records_go(store: RecordStore) -> None:
    store.write(
        [], [RequestRow(f"q{n}", f"s{n % 2}", float(n), "r1", b"x" * 1000) for n in range(10)]
    )
    assert prune(store, before=None, most_bytes=3500) == 7
    assert kept(store, "s1") + kept(store, "s0") == ["q7", "q9", "q8"]
    assert prune(store, before=None, most_bytes=3500) == 0
