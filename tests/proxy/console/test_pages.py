"""The console's JSON, from requests sent through a real proxy to the stand-in: the
sessions page beside the ledger, a session's requests with what each step did and the
exact text the provider received instead, the full output read back from the spill store,
the proxy page; the static files; and the console switched off."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from console_builders import (
    HEADERS,
    SESSION,
    big_output,
    interrupted_request,
    interrupted_turn,
    send_to,
    session_path,
    spilled_turn,
)
from proxy_stack import Stack, running
from servers import serving
from stand_in import Provider
from waiting import wait_for

from middleware.proxy.console.pages import MAX_PAGE, PAGE


def send(stack: Stack, messages: list[dict[str, Any]]) -> httpx.Response:
    return send_to(stack.url, messages)


def api(stack: Stack, path: str) -> Any:
    answer = httpx.get(stack.url + path, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def received_results(provider: Provider, index: int) -> dict[str, str]:
    """The tool results of the ``index``-th body the provider accepted, by call id."""
    body = [b for path, _, b in provider.accepted if path == "/v1/messages"][index]
    out = {}
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result":
                content = block["content"]
                out[block["tool_use_id"]] = (
                    content
                    if isinstance(content, str)
                    else "".join(part["text"] for part in content)
                )
    return out


@pytest.fixture
def session(provider: tuple[Provider, str], tmp_path: Path) -> Any:
    with running(provider, tmp_path) as stack:
        send(stack, spilled_turn())
        send(stack, interrupted_turn())
        assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 2)
        yield stack


def test_the_sessions_page_names_the_agent_counts_what_the_steps_did_and_bills_as_the_ledger(
    session: Stack,
) -> None:
    page = api(session, "/ui/api/sessions")
    (row,) = page["sessions"]
    ledger = api(session, "/sessions/" + quote(SESSION, safe=""))
    assert row["session"] == SESSION and row["agent"] == "Claude Code"
    assert row["source"] == "x-claude-code-session-id" and row["format"] == "anthropic"
    assert row["requests"] == 2
    assert (row["spills"], row["repairs"], row["compactions"]) == (1, 1, 0)
    assert row["billed"] == ledger["billed"] and row["without"] == ledger["without"]
    assert row["saved_dollars"] == ledger["saved_dollars"] > 0
    assert page["total"] == api(session, "/sessions")["total"]


def test_a_session_shows_each_request_with_the_text_the_provider_received_instead(
    session: Stack,
) -> None:
    page = api(session, "/ui/api/sessions/" + quote(SESSION, safe=""))
    first, second = page["requests"]
    assert (first["n"], second["n"]) == (1, 2)

    (spill,) = first["steps"]
    assert (spill["step"], spill["kind"], spill["call"]) == ("budget", "spilled", "toolu_build")
    assert spill["chars"][0] == len(big_output()) > spill["chars"][1]
    assert spill["seen"] == received_results(session.provider, 0)["toolu_build"]
    assert spill["seen_chars"] == len(spill["seen"])
    # The full output, from the spill store through the route the page fetches it from.
    file = Path(spill["path"]).name
    full = httpx.get(session.url + f"/recall/{quote(SESSION, safe='')}/{file}")
    assert full.status_code == 200 and full.text == big_output()

    # The second request repeats the spill (not shown again) and repairs the interruption.
    (repair,) = second["steps"]
    assert (repair["step"], repair["kind"], repair["call"]) == (
        "pairing",
        "synthetic_result",
        "toolu_slow",
    )
    assert repair["seen"] == received_results(session.provider, 1)["toolu_slow"]
    assert second["repeated"] >= 1

    # Each request's bill, to the token, adds up to the ledger's.
    ledger = page["ledger"]
    for kind in ("input", "cache_read", "output"):
        assert sum(r["bill"]["billed"][kind] for r in page["requests"]) == ledger["billed"][kind]
    assert sum(r["bill"]["dollars"] for r in page["requests"]) == pytest.approx(
        ledger["billed"]["dollars"]
    )


def test_the_proxy_page_shows_the_policy_upstreams_passthroughs_and_memory(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    secret = "recall-token-0123456789"
    with running(provider, tmp_path, **{"proxy.recall_token": secret}) as stack:
        send(stack, spilled_turn())
        declared = {**HEADERS, "content-type": "application/json"}  # said JSON, is not
        httpx.post(stack.url + "/v1/messages", content=b"not json", headers=declared, timeout=30)
        page = api(stack, "/ui/api/proxy")
    assert page["policy"]["name"] == "default"
    set_keys = {k["key"]: k for k in page["policy"]["set"]}
    assert set_keys["proxy.recall_token"]["value"] == "(set, not shown)"
    assert secret not in json.dumps(page)
    assert set_keys["spill.root"]["value"] == str(tmp_path / "spill")
    assert page["policies"]["default"]["last_reload_ok"] is True
    assert page["upstreams"]["anthropic"] == stack.upstream
    assert page["passthrough"] == {"not JSON": 1.0}
    memory = {m["name"].split(" (")[0]: m for m in page["memory"]}
    session_state, console = memory["session state"], memory["of which the console"]
    assert 0 < console["bytes"] <= session_state["bytes"] <= session_state["limit"]


def test_the_page_and_its_files_are_served_and_nothing_else(session: Stack) -> None:
    page = httpx.get(session.url + "/ui/", timeout=30)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for name in ("console.js", "console.css"):
        assert f"/ui/static/{name}" in page.text
        assert httpx.get(session.url + f"/ui/static/{name}", timeout=30).status_code == 200
    assert "http" not in httpx.get(session.url + "/ui/static/console.js").text.replace(
        "http://www.w3.org/2000/svg", ""
    )  # nothing fetched from elsewhere
    assert httpx.get(session.url + "/ui/static/book.py", timeout=30).status_code == 404
    assert httpx.get(session.url + "/ui/static/..%2Fbook.py", timeout=30).status_code != 200
    assert httpx.get(session.url + "/ui/api/sessions/nobody", timeout=30).status_code == 404
    assert httpx.get(session.url + "/ui", timeout=30, follow_redirects=True).status_code == 200


def test_with_the_console_off_the_pages_show_the_ledgers_sums(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    with running(provider, tmp_path, **{"proxy.console.enabled": False}) as stack:
        send(stack, spilled_turn())
        assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 1)
        assert stack.proxy.console is None
        page = api(stack, "/ui/api/sessions")
        (row,) = page["sessions"]
        assert page["console"] is False and row["agent"] is None and row["spills"] is None
        assert row["billed"] == api(stack, "/sessions/" + quote(SESSION, safe=""))["billed"]
        detail = api(stack, "/ui/api/sessions/" + quote(SESSION, safe=""))
        assert detail["requests"] == [] and detail["ledger"]["requests"] == 1


def test_the_access_log_counts_the_time_the_console_took_beside_the_cleaning(
    provider: tuple[Provider, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lines = {}
    for enabled in (True, False):
        caplog.clear()
        with (
            caplog.at_level(logging.INFO, logger="middleware.proxy.access"),
            running(provider, tmp_path, **{"proxy.console.enabled": enabled}) as stack,
        ):
            send(stack, interrupted_turn())
            assert wait_for(
                lambda: any(r.name == "middleware.proxy.access" for r in caplog.records)
            )
        (record,) = [r for r in caplog.records if r.name == "middleware.proxy.access"]
        lines[enabled] = json.loads(record.getMessage())
    on, off = lines[True], lines[False]
    assert on["process_ms"] > 0 and 0 < on["console_ms"] < on["ms"]
    assert "console_ms" not in off and off["process_ms"] > 0


def billed(stack: Stack, session: str) -> int:
    """Answers of ``session`` in the ledger."""
    found = stack.proxy.ledger.session(session)
    return int(found["requests"]) if found else 0


def feed(stack: Stack, session: str, numbers: range) -> None:
    headers = {**HEADERS, "x-claude-code-session-id": session}
    with httpx.Client(timeout=60) as client:
        for n in numbers:
            answer = client.post(
                stack.url + "/v1/messages", json=interrupted_request(n), headers=headers
            )
            assert answer.status_code == 200, answer.text
    assert wait_for(lambda: billed(stack, session) >= numbers[-1])


def page(stack: Stack, session: str, **query: Any) -> Any:
    return api(stack, session_path(session, **query))


@pytest.fixture(scope="module")
def long_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A proxy whose session ``long`` has 120 requests (more than a page holds at most),
    each with a repair. (Its records in its own folder: a module's fixture starts before
    the tests' own state folder is set.)"""
    stand_in = Provider()
    folder = tmp_path_factory.mktemp("long")
    with (
        serving(stand_in.app()) as upstream,
        running(
            (stand_in, upstream), folder, **{"ledger.url": f"sqlite:///{folder / 'records.sqlite'}"}
        ) as stack,
    ):
        feed(stack, "long", range(1, 121))
        yield stack


def numbers(answer: Any) -> list[int]:
    return [request["n"] for request in answer["requests"]]


@pytest.mark.slow
def test_a_sessions_requests_come_a_page_at_a_time(long_session: Stack) -> None:
    latest = page(long_session, "long")
    assert numbers(latest) == list(range(121 - PAGE, 121))  # the latest, oldest first
    assert (latest["kept"], latest["removed"], latest["row"]["requests"]) == (120, 0, 120)
    assert latest["last"] == latest["requests"][-1]["seq"] and latest["older"] is True
    assert latest["costs"][-1][0] == 120  # the running cost, to the last answer
    assert all(r["steps"][0]["kind"] == "synthetic_result" for r in latest["requests"])
    # Older pages, one after the other, down to the first request: each request once.
    seen, cursor = numbers(latest), latest["requests"][0]["seq"]
    seqs = {r["n"]: r["seq"] for r in latest["requests"]}
    while True:
        older = page(long_session, "long", before=cursor, limit=40)
        assert "costs" not in older and len(older["requests"]) <= 40
        seen = numbers(older) + seen
        seqs.update((r["n"], r["seq"]) for r in older["requests"])
        if not older["older"]:
            break
        cursor = older["requests"][0]["seq"]
    assert seen == list(range(1, 121)) and latest["first"] == seqs[1]
    assert numbers(page(long_session, "long", after=seqs[110])) == list(range(111, 121))
    assert numbers(page(long_session, "long", after=seqs[10], limit=5)) == [11, 12, 13, 14, 15]
    assert page(long_session, "long", after=seqs[10], limit=5)["more"] is True


@pytest.mark.slow
def test_every_limit_is_clamped_and_a_bad_one_refused(long_session: Stack) -> None:
    assert len(page(long_session, "long", limit=-1)["requests"]) == 1
    assert len(page(long_session, "long", limit=0)["requests"]) == 1
    assert len(page(long_session, "long", limit=10**9)["requests"]) == MAX_PAGE
    for query in ("limit=abc", "before=abc", "after=1.5", "bills=1,x", "limit=1e9",
                  "before=%2B-5", f"limit={'9' * 5000}", "before=5&after=2"):  # fmt: skip
        answer = httpx.get(long_session.url + "/ui/api/sessions/long?" + query, timeout=30)
        assert answer.status_code == 400, query
        assert "whole number" in answer.text or "one of" in answer.text
    feed(long_session, "another", range(1, 3))
    listed = len(api(long_session, "/ui/api/sessions")["sessions"])
    assert listed >= 2
    assert len(api(long_session, "/ui/api/sessions?limit=-1")["sessions"]) == 1
    assert len(api(long_session, f"/ui/api/sessions?limit={10**9}")["sessions"]) == listed
    assert len(api(long_session, "/sessions?limit=-1")["sessions"]) == 0
    assert httpx.get(long_session.url + "/ui/api/sessions?limit=abc").status_code == 400


@pytest.mark.slow
def test_a_poll_asks_only_what_changed_and_costs_the_same_whatever_the_session_holds(
    long_session: Stack,
) -> None:
    stack = long_session
    feed(stack, "live", range(1, 6))
    newest = page(stack, "live", limit=2)["last"]
    empty = httpx.get(stack.url + session_path("live", after=newest), timeout=30)
    assert empty.json()["requests"] == [] and empty.json()["bills"] == {}
    assert "costs" not in empty.json()
    # Two new requests: a poll brings them and the session's new counts, no more.
    feed(stack, "live", range(6, 8))
    changed = page(stack, "live", after=newest)
    assert numbers(changed) == [6, 7] and changed["row"]["requests"] == 7
    assert all(r["bill"]["billed"]["input"] == 10 for r in changed["requests"])  # billed by now
    assert changed["costs"][-1][0] == 7
    # 100 more requests kept: a poll with nothing new is as small as before.
    feed(stack, "live", range(8, 108))
    latest = page(stack, "live", limit=1)
    quiet = httpx.get(stack.url + session_path("live", after=latest["last"]), timeout=30)
    assert quiet.json()["requests"] == [] and quiet.json()["kept"] == 107
    assert len(quiet.content) < 2048
    assert abs(len(quiet.content) - len(empty.content)) < 64, (empty.text, quiet.text)
