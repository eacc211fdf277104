"""A request's bill on the console, in Chromium, whatever its record holds: a repair that
drops an 83 KB result fills the request's record to its bound, and its page still shows
the bill, with the refusal the repair spared; in observe mode, what the cleaned request
would have cost and the session's "would have saved"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest
from billing_builders import Clock, output
from proxy_stack import running
from servers import closed_at_the_end
from stand_in import Provider
from waiting import wait_for

#: Slow (seconds each): `-m "not slow"` leaves it out of a quick run.
pytestmark = pytest.mark.slow

MODEL = "claude-sonnet-5"


def use(n: int) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": f"toolu_{n:02d}",
        "name": "Bash",
        "input": {"command": f"grep -rn handler src/part{n}"},
    }


def result(n: int, text: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": f"toolu_{n:02d}", "content": text}


def one_request(
    caching: tuple[Provider, str, Clock],
    tmp_path: Path,
    browser: Any,
    screenshot: Path,
    messages: list[dict[str, Any]],
    **overrides: Any,
) -> tuple[dict[str, Any], str]:
    """Send ``messages`` as session ``one`` through a proxy with ``overrides``: its ledger,
    and the text of its page in Chromium once the request's bill is drawn."""
    stand_in, upstream, _ = caching
    with running((stand_in, upstream), tmp_path, **overrides) as stack:
        client = closed_at_the_end(
            anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0)
        )
        client.messages.create(
            model=MODEL, max_tokens=8, messages=messages, extra_headers={"x-chatcli-session": "one"}
        )
        assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 1)
        ledger = stack.proxy.ledger.session("one")
        assert ledger is not None
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{stack.url}/ui/#/session/one")
        page.locator(".card.request").first.wait_for()
        page.wait_for_function("!document.body.innerText.includes('No answer billed yet')")
        page.screenshot(path=str(screenshot), full_page=True)
        text: str = page.locator("body").inner_text()
        page.close()
    return ledger, text


def test_a_request_whose_record_is_full_shows_its_bill_and_the_refusal_it_was_spared(
    caching: tuple[Provider, str, Clock], tmp_path: Path, browser: Any, screenshots: Path
) -> None:
    orphan = "\n".join(f"log line {i}: " + "x" * 60 for i in range(1_200))  # 83 KB
    messages = [
        {"role": "user", "content": "Look around."},
        {"role": "assistant", "content": [use(1)]},
        {"role": "user", "content": [result(1, "a.py"), result(9, orphan)]},
    ]
    billed, text = one_request(
        caching,
        tmp_path,
        browser,
        screenshots / "bill-of-a-full-record.png",
        messages,
        **{"proxy.console.request_bytes": 2048},  # the least: the record fills up
    )
    assert f"${billed['billed']['dollars']:.4f}" in text
    assert "the provider would have refused this request" in text
    assert "unexpected `tool_use_id` found in `tool_result` blocks: toolu_09" in text
    assert "Requests a repair saved from a 400\n1" in text


def test_observe_mode_shows_what_the_cleaned_request_would_have_cost(
    caching: tuple[Provider, str, Clock], tmp_path: Path, browser: Any, screenshots: Path
) -> None:
    messages = [
        {"role": "user", "content": "Look around."},
        {"role": "assistant", "content": [use(1)]},
        {"role": "user", "content": [result(1, output(1))]},
    ]
    ledger, text = one_request(
        caching,
        tmp_path,
        browser,
        screenshots / "observe-mode.png",
        messages,
        **{"proxy.mode": "observe"},
    )
    observe = ledger["observe"]
    assert "Observe mode: this request went upstream as it came" in text
    assert "cleaned, would have been" in text
    assert f"${observe['would_have_saved_dollars']:.4f} (1 of 1 requests projected" in text
    assert observe["would_have_saved_dollars"] > 0
    assert "spilled" in text  # the step it would have taken
