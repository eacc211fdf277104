"""The console's JSON, from requests sent through a real proxy to the stand-in: the
sessions page beside the ledger, a session's requests with what each step did and the
exact text the provider received instead, the full output read back from the spill store,
the proxy page; the static files; and the console switched off."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from proxy_stack import Stack, running
from stand_in import Provider
from waiting import wait_for

SESSION = "0f6c7c52-console-session"
HEADERS = {
    "x-api-key": "sk-ant-test",
    "anthropic-version": "2023-06-01",
    "x-claude-code-session-id": SESSION,
    "user-agent": "claude-cli/2.1.197 (external, sdk-cli)",
}
MODEL = "claude-sonnet-4-5"


def big_output() -> str:
    return "".join(f"line {i:04d}: {'build step output ' * 5}\n" for i in range(400))


def spilled_turn() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Build it."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_build", "name": "Bash", "input": {"command": "make"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_build", "content": big_output()},
        ]},
    ]  # fmt: skip


def interrupted_turn() -> list[dict[str, Any]]:
    """The history after the agent was stopped in the middle of a call: the call has no
    result, and the user typed on."""
    return [
        *spilled_turn(),
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_slow", "name": "Bash", "input": {"command": "sleep"}},
        ]},
        {"role": "user", "content": "Go on."},
    ]  # fmt: skip


def send(stack: Stack, messages: list[dict[str, Any]]) -> httpx.Response:
    body = {"model": MODEL, "max_tokens": 100, "messages": messages}
    answer = httpx.post(stack.url + "/v1/messages", json=body, headers=HEADERS, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer


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
                out[block["tool_use_id"]] = content if isinstance(content, str) else "".join(
                    part["text"] for part in content)  # fmt: skip
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
        "pairing", "synthetic_result", "toolu_slow")  # fmt: skip
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
