"""A Gemini CLI run through the proxy, on the requests it sends with its model router on
(tests/gemini_run_builders.py; the real CLI runs in tests/proxy/test_agents.py): its
router calls and its opening request are filed under its conversation, and a router call
between two of the conversation's requests is cleaned beside it: the conversation's next
request continues the one before it and is estimated against it, as if the router call
had not been made."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from billing_builders import Clock, output
from gemini_run_builders import CLI, run
from prompt_cache import PromptCache
from proxy_stack import running
from servers import serving
from stand_in import Provider
from waiting import wait_for

#: Slow (seconds each: two proxies, a spilled output): `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow


def through(
    tmp_path: Path, names: list[str], prefixed: bool = True
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The requests of one run named ``names`` (the call's output over the cap) sent
    through a proxy in front of a stand-in that bills as a prompt cache does: the
    sessions ``/sessions`` lists once each is billed, and the page of the first."""
    bodies = run("run_shell_command_1796194697991_0", output=output(1), prefixed=prefixed)
    stand_in = Provider(cache=PromptCache(Clock()), context_chars=10**8)
    with serving(stand_in.app()) as upstream, running((stand_in, upstream), tmp_path) as stack:
        for name in names:
            model = "gemini-3.1-pro-preview" if bodies[name].get("tools") else "gemini-flash-lite"
            url = f"{stack.url}/v1beta/models/{model}:generateContent"
            answer = httpx.post(url, json=bodies[name], headers={**CLI, "x-goog-api-key": "k"})
            assert answer.status_code == 200, answer.text

        def billed() -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = httpx.get(stack.url + "/sessions").json()["sessions"]
            return found if sum(s["requests"] for s in found) == len(names) else []

        assert wait_for(billed, 10)
        listed = billed()
        page = httpx.get(f"{stack.url}/ui/api/sessions/{quote(listed[0]['session'], safe='')}")
        return listed, page.json()


@pytest.mark.parametrize("prefixed", [True, False], ids=["router ids", "conversation ids"])
def test_a_router_call_is_filed_with_its_conversation_and_cleaned_beside_it(
    tmp_path: Path, prefixed: bool
) -> None:
    """Gemini CLI's router sends the history's call ids as ``NAME__ID``; a copy of the
    history with the conversation's own ids (keyed as the conversation is) is cleaned
    beside it too."""
    asked = ["router", "opening", "first", "router again", "again"]
    listed, page = through(tmp_path / "one", asked, prefixed)  # (one length: previews name it)
    assert [s["requests"] for s in listed] == [5]  # one session
    alone, unrouted = through(tmp_path / "two", [n for n in asked if n != "router again"])
    assert listed[0]["session"] == alone[0]["session"]  # the conversation's own key
    again, without = page["requests"][-1], unrouted["requests"][-1]
    assert again["continued"] and without["continued"]  # it went on from "first"
    assert again["bill"]["without"] == without["bill"]["without"]
    assert again["bill"]["billed"] == without["bill"]["billed"]
    assert again["bill"]["without"] != again["bill"]["billed"]  # the estimate counts
