"""Writing records: each answer and request counts once however often it is written, and the
sums of sessions and days move with the rows newly written only."""

from __future__ import annotations

import threading

import sqlalchemy as sa
from record_builders import answer

from middleware.records import queries
from middleware.records.rows import RequestRow
from middleware.records.store import MEMORY, RecordStore
from middleware.records.tables import ANSWER_TAGS, DAYS, SESSIONS


def session_row(store: RecordStore, session: str) -> dict[str, object]:
    with store.connection() as connection:
        row = connection.execute(sa.select(SESSIONS).where(SESSIONS.c.session == session)).one()
    return dict(row._mapping)


def test_an_answer_written_twice_counts_once(store: RecordStore) -> None:
    assert store.write([answer("a1"), answer("a2")], []) == 2
    assert store.write([answer("a1"), answer("a3")], []) == 1  # a retried batch
    row = session_row(store, "s1")
    assert row["answers"] == 3
    assert row["billed_input"] == 30 and row["without_input"] == 90
    assert abs(float(row["dollars"]) - 0.03) < 1e-12  # type: ignore[arg-type]


def test_a_request_written_twice_counts_once(store: RecordStore) -> None:
    request = RequestRow("q1", "s1", 1.0, "r1", b'{"x":1}', agent="claude-code", repairs=2)
    assert store.write([], [request, request]) == 1
    assert store.write([], [request]) == 0
    row = session_row(store, "s1")
    assert (row["requests"], row["repairs"], row["agent"]) == (1, 2, "claude-code")


def test_a_session_spans_the_times_of_all_its_rows(store: RecordStore) -> None:
    store.write([answer("a1", time=50.0)], [RequestRow("q1", "s1", 70.0, "r1", b"{}")])
    store.write([answer("a2", time=10.0)], [])
    row = session_row(store, "s1")
    assert (row["first"], row["last"]) == (10.0, 70.0)


def test_unread_and_unpriced_answers_are_counted_apart(store: RecordStore) -> None:
    store.write(
        [
            answer("a1"),
            answer("a2", unread=True, billed={}, without={}),
            answer("a3", dollars=None, dollars_without=None),
        ],
        [],
    )
    row = session_row(store, "s1")
    assert (row["answers"], row["unread"], row["unpriced"]) == (3, 1, 1)
    assert row["billed_input"] == 20  # the unpriced one's tokens count, the unread has none


def test_days_hold_the_sums_by_model(store: RecordStore) -> None:
    store.write([answer("a1"), answer("a2", model="gpt-y", session=None)], [])
    with store.connection() as connection:
        rows = connection.execute(sa.select(DAYS).order_by(DAYS.c.model)).all()
    assert [(r.day, r.model, r.answers) for r in rows] == [
        ("2023-11-14", "claude-x", 1),
        ("2023-11-14", "gpt-y", 1),
    ]


def test_tags_are_kept_with_their_answer(store: RecordStore) -> None:
    store.write([answer("a1", tags=(("team", "infra"), ("project", "x")))], [])
    store.write([answer("a1", tags=(("team", "other"),))], [])  # written again: unchanged
    with store.connection() as connection:
        rows = connection.execute(sa.select(ANSWER_TAGS)).all()
    assert sorted((r.name, r.value) for r in rows) == [("project", "x"), ("team", "infra")]


def test_a_sessions_requests_are_numbered_in_the_order_they_are_seen(postgres_url: str) -> None:
    """A page polls a session's requests after the newest ``seq`` it shows, so none may
    become visible after one with a greater ``seq``. PostgreSQL numbers rows as they are
    inserted, and transactions commit in any order: a batch held up on one session (its
    row locked by another writer) must not have numbered its request of another session
    while a third writer numbers and commits a later one of that session."""
    store = RecordStore.open(postgres_url)
    s = SESSIONS
    try:
        store.write([], [RequestRow("seed", "s0", 0.0, "r1", b"{}")])
        with store.engine.connect() as holder:
            transaction = holder.begin()
            holder.execute(sa.update(s).where(s.c.session == "s0").values(repairs=s.c.repairs))
            batch = [
                RequestRow("a0", "s0", 1.0, "r1", b"{}"),
                RequestRow("a1", "s1", 1.0, "r1", b"{}"),
            ]
            held = threading.Thread(target=store.write, args=([], batch))
            held.start()
            held.join(1.0)  # waits for s0's row
            store.write([], [RequestRow("b1", "s1", 2.0, "r2", b"{}")])
            seen = [row["key"] for row in queries.requests(store, "s1", limit=10)]
            transaction.commit()
        held.join(30)
        assert seen == ["b1"]
        rows = queries.requests(store, "s1", limit=10)
        assert [row["key"] for row in rows] == ["a1", "b1"]  # seen later, numbered later
    finally:
        store.close()


def test_nothing_is_prepared_on_the_server_so_a_pooler_may_share_connections(
    postgres_url: str,
) -> None:
    """PgBouncer in transaction mode gives each transaction any server connection: a
    statement prepared on one is missing on the next (docs/scaling.md says none is)."""
    store = RecordStore.open(postgres_url)
    try:
        for n in range(12):  # psycopg prepares a statement from its 5th run by default
            store.write([answer(f"p{n}", session="s")], [])
            queries.session(store, "s")
        with store.connection() as connection:
            prepared = connection.execute(
                sa.text("SELECT count(*) FROM pg_prepared_statements")
            ).scalar_one()
        assert prepared == 0
    finally:
        store.close()


def test_a_store_in_memory_closes_only_once_its_connection_is_let_go() -> None:
    """A thread using the one connection of a store in memory (the console's pruning)
    finishes its statement before the store closes: closing it under a running statement
    crashed the test worker (a segmentation fault in the CI run of issue 45)."""
    store = RecordStore.open(MEMORY)
    inside, release = threading.Event(), threading.Event()
    order: list[str] = []

    def prune() -> None:
        with store.connection() as connection:
            inside.set()
            release.wait(10)
            connection.execute(sa.select(sa.func.count()).select_from(SESSIONS)).scalar()
            order.append("statement")

    worker = threading.Thread(target=prune)
    worker.start()
    assert inside.wait(10)
    closing = threading.Thread(target=lambda: (store.close(), order.append("closed")))
    closing.start()
    closing.join(0.3)
    assert closing.is_alive() and order == []  # it waits for the statement
    release.set()
    worker.join(10)
    closing.join(10)
    assert order == ["statement", "closed"]
