"""What the pages read: a session's sums, the latest sessions (filtered by caller and tags),
the totals, sums by a dimension, and a session's requests a page at a time; the same
answers whichever database holds them."""

from __future__ import annotations

from record_builders import answer

from middleware.records import queries
from middleware.records.queries import Filters
from middleware.records.rows import RequestRow
from middleware.records.store import RecordStore


def fill(store: RecordStore) -> None:
    store.write(
        [
            answer("a1", "s1", time=100.0, caller="k1", tags=(("team", "infra"),)),
            answer("a2", "s1", time=110.0, caller="k2", model="gpt-y"),
            answer("a3", "s2", time=120.0, caller="k1", tags=(("team", "web"),), agent="codex"),
            answer("a4", "s3", time=90.0, caller="k1", tags=(("team", "infra"), ("p", "x"))),
            answer("a5", None, time=130.0, unread=True, billed={}, without={}),
        ],
        [],
    )


def test_a_session_has_its_sums_and_models(store: RecordStore) -> None:
    fill(store)
    found = queries.session(store, "s1")
    assert found is not None
    assert (found["answers"], found["billed_input"], found["first"], found["last"]) == (
        2,
        20,
        100.0,
        110.0,
    )
    assert found["models"] == {"claude-x": 1, "gpt-y": 1}
    assert queries.session(store, "nobody") is None


def test_the_latest_sessions_come_first(store: RecordStore) -> None:
    fill(store)
    assert [row["session"] for row in queries.recent(store, 10)] == ["s2", "s1", "s3"]
    assert [row["session"] for row in queries.recent(store, 2)] == ["s2", "s1"]


def test_filters_sum_only_the_answers_they_select(store: RecordStore) -> None:
    fill(store)
    rows = queries.recent(store, 10, Filters(caller="k1"))
    assert [(r["session"], r["answers"]) for r in rows] == [("s2", 1), ("s1", 1), ("s3", 1)]
    rows = queries.recent(store, 10, Filters(tags=(("team", "infra"),)))
    assert [r["session"] for r in rows] == ["s1", "s3"]
    rows = queries.recent(store, 10, Filters(tags=(("team", "infra"), ("p", "x"))))
    assert [r["session"] for r in rows] == ["s3"]
    assert queries.recent(store, 10, Filters(agent="codex"))[0]["session"] == "s2"


def test_totals_count_every_answer(store: RecordStore) -> None:
    fill(store)
    total = queries.totals(store)
    assert (total["answers"], total["unread"], total["sessions"]) == (5, 1, 3)
    assert total["billed_input"] == 40
    assert abs(total["dollars"] - 0.04) < 1e-9
    filtered = queries.totals(store, Filters(caller="k1"))
    assert (filtered["answers"], filtered["sessions"]) == (3, 3)


def test_sums_by_a_dimension(store: RecordStore) -> None:
    fill(store)
    by_key = {row["group"]: row["answers"] for row in queries.by(store, "key")}
    assert by_key == {"k1": 3, "k2": 1, None: 1}
    by_tag = {row["group"]: row["answers"] for row in queries.by(store, "tag")}
    assert by_tag == {"team=infra": 2, "team=web": 1, "p=x": 1}
    by_model = {row["group"]: row["answers"] for row in queries.by(store, "model")}
    assert by_model == {"claude-x": 4, "gpt-y": 1}
    by_day = queries.by(store, "day")
    assert [(row["group"], row["answers"]) for row in by_day] == [("1970-01-01", 5)]
    # Read from the days' running sums (bounded at any size), as the answers say.
    assert (by_day[0]["unread"], by_day[0]["billed_input"]) == (1, 40)
    assert abs(by_day[0]["dollars"] - 0.04) < 1e-9


def test_a_sessions_requests_come_a_page_at_a_time(store: RecordStore) -> None:
    rows = [RequestRow(f"q{n}", "s1", float(n), "r1", b'{"n":%d}' % n) for n in range(25)]
    store.write([answer("a7", "s1", request="q7")], rows)
    first = queries.requests(store, "s1", limit=10)
    assert [row["key"] for row in first] == [f"q{n}" for n in range(24, 14, -1)]
    older = queries.requests(store, "s1", before=first[-1]["seq"], limit=10)
    assert [row["key"] for row in older] == [f"q{n}" for n in range(14, 4, -1)]
    assert [bill["key"] for bill in older[7]["bills"]] == ["a7"]
    store.write([], [RequestRow("q25", "s1", 25.0, "r2", b"{}")])
    newer = queries.requests(store, "s1", after=first[0]["seq"], limit=10)
    assert [row["key"] for row in newer] == ["q25"]


def test_after_a_request_come_the_first_after_it(store: RecordStore) -> None:
    """A page that polls after the newest request it shows gets the next ones in order, a
    page at a time, never the newest ones with a gap before them."""
    store.write([], [RequestRow(f"q{n}", "s1", float(n), "r1", b"{}") for n in range(12)])
    (oldest,) = queries.requests(store, "s1", before=2, limit=1)
    newer = queries.requests(store, "s1", after=oldest["seq"], limit=4)
    assert [row["key"] for row in newer] == ["q4", "q3", "q2", "q1"]
