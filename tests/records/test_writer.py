"""The writer: records put on the request path are written by a thread of its own; a
database that is away holds nobody up and loses nothing up to the bound; a row it refuses
costs that row only; an outbox keeps what a replica held across its death."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from database import PostgresServer
from record_builders import answer

from middleware.records import Records, RecordSettings
from middleware.records.outbox import Outbox
from middleware.records.rows import RequestRow
from middleware.records.store import RecordStore
from middleware.records.tables import ANSWER_TAGS, ANSWERS, REQUESTS, SESSIONS
from middleware.records.writer import RecordWriter

BIG = 10**9


def answers_in(store: RecordStore) -> list[str]:
    with store.connection() as connection:
        return sorted(connection.execute(sa.select(ANSWERS.c.key)).scalars())


def test_what_is_put_is_written_and_flush_waits_for_it(store: RecordStore) -> None:
    writer = RecordWriter(store, BIG)
    for n in range(1200):  # more than one batch
        assert writer.put(answer(f"a{n}"))
    assert writer.flush(30)
    assert len(answers_in(store)) == 1200
    assert writer.counts.written == 1200 and writer.counts.dropped == 0
    assert writer.close(5)


def test_past_the_bound_records_are_dropped_and_counted(store: RecordStore) -> None:
    one = answer("a0").size
    writer = RecordWriter(store, 3 * one, linger_seconds=0.5)  # rows wait in the queue
    results = [writer.put(answer(f"a{n}")) for n in range(5)]
    assert results == [True, True, True, False, False]
    assert writer.counts.dropped == 2
    assert writer.flush(30)
    assert answers_in(store) == ["a0", "a1", "a2"]
    writer.close(5)


def test_a_row_the_database_refuses_costs_that_row_only(store: RecordStore) -> None:
    writer = RecordWriter(store, BIG, linger_seconds=0.2)
    bad = answer("bad", format=None)  # format is NOT NULL: refused by either database
    for row in (answer("a1"), bad, answer("a2")):
        writer.put(row)
    assert writer.flush(30)
    assert answers_in(store) == ["a1", "a2"]
    assert writer.counts.refused == 1 and writer.counts.reachable
    writer.close(5)


def test_a_database_that_is_down_holds_records_until_it_is_back(
    postgres: PostgresServer, postgres_url: str
) -> None:
    store = RecordStore.open(postgres_url)
    writer = RecordWriter(store, BIG)
    writer.put(answer("before"))
    assert writer.flush(30)
    postgres.stop()
    try:
        started = time.monotonic()
        for n in range(300):
            assert writer.put(answer(f"down{n}"))  # never waits for the database
        put_seconds = time.monotonic() - started
        assert not writer.flush(1.0)
        assert not writer.counts.reachable and writer.counts.error
    finally:
        postgres.start()
    assert writer.flush(60)
    assert len(answers_in(store)) == 301
    assert writer.counts.reachable and writer.counts.dropped == 0
    assert put_seconds < 5  # generous: a put is a queue append; a wait would be seconds
    writer.close(5)
    store.close()


def test_an_outbox_sends_what_a_killed_replica_held(
    postgres: PostgresServer, postgres_url: str, tmp_path: Path
) -> None:
    """A process puts records while the database is down and is killed; the next process
    with the same outbox sends them, and the one it had already sent counts once."""
    path = tmp_path / "outbox.sqlite"
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        sys.path.insert(0, {str(Path(__file__).parent.parent)!r})
        from record_builders import answer
        from middleware.records.outbox import Outbox
        from middleware.records.store import RecordStore
        from middleware.records.writer import RecordWriter
        store = RecordStore.open({postgres_url!r})
        outbox = Outbox(__import__("pathlib").Path({str(path)!r}), store)
        writer = RecordWriter(outbox, 10**9)
        writer.put(answer("sent"))
        assert writer.flush(30)
        print("stop", flush=True)
        sys.stdin.readline()
        for n in range(50):
            writer.put(answer(f"held{{n}}"))
        while outbox.held < 50 * answer("x").size:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline() == "stop\n"
        postgres.stop()
        try:
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.wait(60) == -9
        finally:
            postgres.start()
    store = RecordStore.open(postgres_url)
    assert answers_in(store) == ["sent"]
    outbox = Outbox(path, store)
    writer = RecordWriter(outbox, BIG)
    writer.put(answer("sent"))  # written again by a retry: counted once
    assert writer.flush(60)
    assert len(answers_in(store)) == 51
    with store.connection() as connection:
        count = connection.execute(sa.select(SESSIONS.c.answers)).scalar_one()
    assert count == 51
    assert outbox.held == 0
    writer.close(5)
    outbox.close()
    store.close()


def test_requests_and_answers_go_through_the_outbox_alike(
    postgres_url: str, tmp_path: Path
) -> None:
    store = RecordStore.open(postgres_url)
    outbox = Outbox(tmp_path / "outbox.sqlite", store)
    writer = RecordWriter(outbox, BIG)
    writer.put(RequestRow("q1", "s1", 5.0, "r1", b'{"n":1,"bytes":"\\u00e9"}', repairs=1))
    writer.put(answer("a1", request="q1", tags=(("team", "infra"),)))
    assert writer.flush(30)
    with store.connection() as connection:
        record = connection.execute(sa.select(REQUESTS.c.record)).scalar_one()
        tag = connection.execute(sa.select(ANSWER_TAGS.c.value)).scalar_one()
    assert record == b'{"n":1,"bytes":"\\u00e9"}' and tag == "infra"
    writer.close(5)
    outbox.close()
    store.close()


def test_a_replica_starts_while_its_database_is_down(
    postgres: PostgresServer, postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its records wait in the outbox; the schema is made, and they are written, when the
    database answers."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    settings = RecordSettings(postgres_url, BIG, None, None, "r1")
    postgres.stop()
    try:
        records = Records.open(settings, replica="r1")
        assert records.put(answer("while-down"))
        assert not records.writer.flush(1.0)
        assert not records.health()["reachable"]
    finally:
        postgres.start()
    assert records.writer.flush(60)
    assert answers_in(records.store()) == ["while-down"]
    assert records.health()["reachable"]
    records.close()


def test_an_outbox_emptied_goes_on_sending_what_comes_after(
    postgres_url: str, tmp_path: Path
) -> None:
    """Its ids keep rising once it is empty (a reused id would read as sent already)."""
    store = RecordStore.open(postgres_url)
    outbox = Outbox(tmp_path / "outbox.sqlite", store)
    writer = RecordWriter(outbox, BIG)
    for round_ in range(3):
        for n in range(5):
            writer.put(answer(f"a{round_}-{n}"))
        assert writer.flush(30), round_
        assert outbox.held == 0
    assert len(answers_in(store)) == 15
    writer.close(5)
    outbox.close()
    store.close()


def test_an_outbox_sends_what_comes_within_its_linger_in_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows written one batch at a time while it lingers go to the database together; a
    flush does not wait for the linger to end."""
    store = RecordStore.open(f"sqlite:///{tmp_path / 'records.sqlite'}")
    sent: list[int] = []
    write = store.write

    def counted(answers: Any, requests: Any) -> int:
        sent.append(len(answers) + len(requests))
        return write(answers, requests)

    monkeypatch.setattr(store, "write", counted)
    outbox = Outbox(tmp_path / "outbox.sqlite", store, linger_seconds=3600)
    try:
        for n in range(5):
            outbox.write([answer(f"a{n}")], [])
        assert outbox.flush(60, time.monotonic)  # an hour's linger: the flush ends it
        assert sent == [5] and answers_in(store) == [f"a{n}" for n in range(5)]
    finally:
        outbox.close()
        store.close()
