"""What the console's pages read: a session's requests a page at a time, numbered in their
session whichever replica wrote them and however many of the oldest were removed; the bills
of some of them; the session's running cost; the same whichever database holds them."""

from __future__ import annotations

import pytest
from record_builders import answer

from middleware.records import queries, request_pages
from middleware.records.rows import RequestRow
from middleware.records.store import RecordStore, prune


def test_a_page_of_requests_numbers_them_in_their_session(store: RecordStore) -> None:
    """Each request's number counts the session's requests up to it (whichever replica
    wrote them, and however many of the oldest were removed since)."""
    store.write([], [RequestRow(f"q{n}", "s1", float(n), "r1", b"{}") for n in range(1, 11)])
    store.write([], [RequestRow("other", "s2", 5.0, "r1", b"{}")])
    page = request_pages.request_page(store, "s1", limit=3)
    assert [(row["key"], row["n"]) for row in page.requests] == [("q10", 10), ("q9", 9), ("q8", 8)]
    assert (page.kept, page.counted) == (10, 10)
    assert (page.first, page.last) == (page.requests[-1]["seq"] - 7, page.requests[0]["seq"])
    older = request_pages.request_page(store, "s1", before=page.requests[-1]["seq"], limit=3)
    assert [row["n"] for row in older.requests] == [7, 6, 5]
    prune(store, before=3.5, most_bytes=None)  # q1, q2 and q3 go
    again = request_pages.request_page(store, "s1", after=older.requests[-1]["seq"], limit=2)
    assert [(row["key"], row["n"]) for row in again.requests] == [("q7", 7), ("q6", 6)]
    assert (again.kept, again.counted) == (7, 10)
    empty = request_pages.request_page(store, "nobody", limit=3)
    assert (empty.requests, empty.kept, empty.first, empty.last) == ([], 0, None, None)


def test_the_bills_of_some_requests(store: RecordStore) -> None:
    rows = [RequestRow(f"q{n}", "s1", float(n), "r1", b"{}") for n in range(1, 4)]
    store.write([answer("a2", "s1", request="q2"), answer("a3", "s1", request="q3")], rows)
    seqs = {row["key"]: row["seq"] for row in queries.requests(store, "s1", limit=10)}
    found = request_pages.bills(store, "s1", [seqs["q1"], seqs["q2"]])
    assert list(found) == [seqs["q2"]] and [a["key"] for a in found[seqs["q2"]]] == ["a2"]
    assert request_pages.bills(store, "s2", [seqs["q2"]]) == {}
    assert request_pages.bills(store, "s1", []) == {}


def test_the_running_cost_of_a_session(store: RecordStore) -> None:
    """What a session's priced answers cost so far after each, in the order they came,
    billed and without the middleware: a few points at most, the last among them."""
    store.write(
        [
            answer(f"a{n}", "s1", time=float(n), dollars=0.01, dollars_without=0.03)
            for n in range(1, 11)
        ]
        + [
            answer("unpriced", "s1", time=4.5, dollars=None, dollars_without=None),
            answer("elsewhere", "s2", time=3.0),
        ],
        [],
    )
    whole = request_pages.running_cost(store, "s1", 20)
    assert [k for k, _, _ in whole] == list(range(1, 11))
    assert whole[-1][1] == pytest.approx(0.10) and whole[-1][2] == pytest.approx(0.30)
    few = request_pages.running_cost(store, "s1", 4)
    assert len(few) <= 4 and few[0][0] == 1 and few[-1] == whole[-1]
    assert request_pages.running_cost(store, "nobody", 4) == []
