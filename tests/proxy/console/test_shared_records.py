"""The console's records live in the records database (``ledger.url``): a restart finds
them (the SQLite file in the state folder, with no configuration), and every replica on one
PostgreSQL database shows every request of a session with its bill, whichever replica
served it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from console_builders import (
    HEADERS,
    SESSION,
    get_json,
    interrupted_request,
    interrupted_turn,
    send_to,
    session_path,
    spilled_turn,
)
from proxy_stack import running, serve_process
from stand_in import Provider
from waiting import wait_for

from middleware.proxy import own_routes


def billed(url: str, session: str = SESSION) -> int:
    """Answers of ``session`` in the ledger ``url`` reads."""
    answer = httpx.get(url + session_path(session).replace("/ui/api", ""), timeout=30)
    return int(answer.json()["requests"]) if answer.status_code == 200 else 0


@pytest.mark.slow
def test_a_restart_keeps_the_consoles_history(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    """``chatcli-mw serve`` with no ledger.url (the SQLite file in $XDG_STATE_HOME),
    stopped and started again: its console still lists the session and shows both
    requests, what the steps did to each and their bills."""
    _, upstream = provider
    overrides = {"spill.root": str(tmp_path / "spill")}
    with serve_process(upstream, overrides) as url:
        send_to(url, spilled_turn())
        send_to(url, interrupted_turn())
        assert wait_for(lambda: billed(url) == 2)
    with serve_process(upstream, overrides) as url:
        (row,) = get_json(url, "/ui/api/sessions")["sessions"]
        page = get_json(url, session_path())
    assert (row["session"], row["agent"], row["requests"]) == (SESSION, "Claude Code", 2)
    assert (row["spills"], row["repairs"]) == (1, 1)
    first, second = page["requests"]
    assert [step["kind"] for step in first["steps"]] == ["spilled"]
    assert [step["kind"] for step in second["steps"]] == ["synthetic_result"]
    assert all(request["bill"]["billed"]["input"] > 0 for request in page["requests"])


@pytest.mark.slow
def test_every_replica_shows_every_request_of_a_session_with_its_bill(
    provider: tuple[Provider, str], tmp_path: Path, postgres_url: str
) -> None:
    """Two proxies on one PostgreSQL database, a session's requests sent to each in turn:
    either one's page of the session shows all of them, each with its bill, and sums
    them as the stand-in billed them."""
    sent = 6
    with (
        running(
            provider, tmp_path / "a", **{"ledger.url": postgres_url, "ledger.replica": "a"}
        ) as a,
        running(
            provider, tmp_path / "b", **{"ledger.url": postgres_url, "ledger.replica": "b"}
        ) as b,
    ):
        with httpx.Client(timeout=60) as client:
            for n in range(1, sent + 1):
                url = (a, b)[n % 2].url
                answer = client.post(
                    url + "/v1/messages", json=interrupted_request(n), headers=HEADERS
                )
                assert answer.status_code == 200, answer.text
        assert wait_for(lambda: billed(a.url) == billed(b.url) == sent)
        for stack in (a, b):
            page = get_json(stack.url, session_path())
            requests = page["requests"]
            assert len(requests) == sent, [r.get("replica") for r in requests]
            # In the order the database received them (each replica's in its own order),
            # numbered so in the session.
            assert sorted(r["steps"][0]["call"] for r in requests) == [
                f"toolu_{n:04d}" for n in range(1, sent + 1)
            ]
            assert [r["n"] for r in requests] == list(range(1, sent + 1))
            for replica in ("a", "b"):
                times = [r["time"] for r in requests if r["replica"] == replica]
                assert times == sorted(times)
            assert {r["replica"] for r in requests} == {"a", "b"}
            assert all(r["bill"]["billed"] == {"input": 10, "output": 5, "cache_read": 0,
                                               "cache_write_5m": 0, "cache_write_1h": 0}
                       for r in requests)  # fmt: skip
            assert page["row"]["requests"] == sent and page["row"]["repairs"] == sent
            assert page["ledger"]["billed"]["input"] == 10 * sent


def fetch(url: str, into: list[httpx.Response]) -> None:
    into.append(httpx.get(url, timeout=60))


@pytest.mark.slow
def test_a_database_that_does_not_answer_gets_a_503_and_holds_up_nothing_else(
    provider: tuple[Provider, str],
    tmp_path: Path,
    postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The console's reads run in a worker thread within a time bound: while the database
    hangs (a lock another client holds), its pages answer 503 saying so, and the proxy
    answers everything else meanwhile."""
    monkeypatch.setattr(own_routes, "READ_SECONDS", 3.0)
    with running(provider, tmp_path, **{"ledger.url": postgres_url}) as stack:
        send_to(stack.url, spilled_turn())
        assert wait_for(lambda: billed(stack.url) == 1)
        engine = sa.create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://"))
        try:
            with engine.connect() as holder:
                holding = holder.begin()
                holder.execute(sa.text("LOCK TABLE chatcli_sessions IN ACCESS EXCLUSIVE MODE"))
                for path in ("/ui/api/sessions", session_path()):
                    answers: list[httpx.Response] = []
                    reading = threading.Thread(target=fetch, args=(stack.url + path, answers))
                    reading.start()
                    assert httpx.get(stack.url + "/healthz", timeout=60).status_code == 200
                    assert reading.is_alive()  # answered while the read waits
                    reading.join(60)
                    (answer,) = answers
                    assert answer.status_code == 503, answer.text
                    assert "did not answer within 3 s" in answer.text
                holding.rollback()
        finally:
            engine.dispose()
        assert len(get_json(stack.url, session_path())["requests"]) == 1


@pytest.mark.slow
def test_the_proxy_removes_old_console_records_and_keeps_the_sums(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    """A console record older than ``ledger.keep_days`` (30 days) is removed when the
    proxy prunes (as it starts, then hourly); the session's counts and bill stay, and its
    page says how many records went."""
    ledger_path = session_path().replace("/ui/api", "")
    with running(provider, tmp_path) as stack:
        stack.proxy.ledger.clock = lambda: time.time() - 40 * 86400  # 40 days ago
        send_to(stack.url, spilled_turn())
        stack.proxy.ledger.clock = time.time
        send_to(stack.url, interrupted_turn())
        assert wait_for(lambda: billed(stack.url) == 2)
        bill = get_json(stack.url, ledger_path)
        assert get_json(stack.url, session_path())["kept"] == 2
    with running(provider, tmp_path) as stack:
        assert wait_for(lambda: get_json(stack.url, session_path())["kept"] == 1)
        page = get_json(stack.url, session_path())
        assert page["removed"] == 1 and [r["n"] for r in page["requests"]] == [2]
        assert (page["row"]["requests"], page["row"]["spills"], page["row"]["repairs"]) == (2, 1, 1)
        assert get_json(stack.url, ledger_path) == bill
