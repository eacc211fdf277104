"""The console in a real browser (Debian's Chromium, driven by Playwright's Python package):
a real Claude Code session through the proxy against the stand-in, whose big output is
spilled and read back, then an interrupted call repaired while the session's page is open.
The page shows the session as Claude Code's, the spill's preview as the provider received
it and its full text from the spill store, the repair as it came in (no reload), and the
saving ``chatcli-mw ledger`` reads from the ledger file. And a session of 300 requests,
shown a page at a time, older ones on demand, a new one as it comes without a reload, and
what the page fetches while nothing changes small. Each with its records in the SQLite file
of the state folder (the default) and in a PostgreSQL database (``ledger.url``).

Screenshots of the three pages go to ``$CHATCLI_CONSOLE_SCREENSHOTS`` (``.ci/run`` sets
``artifacts/console``, which git ignores), else to the test's own tmp folder; their paths
are logged. Skips, saying why, without Chromium, Playwright or Claude Code.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_events import events, results, without_results
from agent_script import RUN_BIG, big_output, scripted
from agents import AGENT_BY_NAME, missing
from prompt_cache import PromptCache
from servers import serving
from stand_in import Provider
from waiting import wait_for

from middleware.proxy.build import build_proxy

#: Slow (seconds each): `-m "not slow"` leaves it out of a quick run.
pytestmark = pytest.mark.slow

CLAUDE = AGENT_BY_NAME["claude"]
PRICES = {"input": 3, "output": 15, "cache_read": 0.3, "cache_write_5m": 3.75, "cache_write_1h": 6}
logger = logging.getLogger(__name__)


def ledger_cli(*args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "middleware", "ledger", *args, "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> dict[str, str]:
    """The policy keys that put the records in each kind of database."""
    if request.param == "sqlite":
        return {}  # ledger.url's default: records.sqlite in $XDG_STATE_HOME/chatcli-mw
    return {"ledger.url": request.getfixturevalue("postgres_url")}


def test_the_console_shows_a_claude_code_session_its_spill_its_repair_and_its_saving(
    tmp_path: Path, browser: Any, store: dict[str, str], screenshots: Path
) -> None:
    if missing("claude"):
        pytest.skip(missing("claude"))
    provider = Provider(script=scripted(CLAUDE.tools, CLAUDE.fmt), cache=PromptCache())
    ledger_file = tmp_path / "ledger.jsonl"
    shots = screenshots
    with serving(provider.app()) as upstream:
        proxy, app = build_proxy(None, {
            "proxy.upstreams.anthropic": upstream, "spill.root": str(tmp_path / "spill"),
            "ledger.file": str(ledger_file), "ledger.prices.claude-stand-in": PRICES, **store,
        })  # fmt: skip
        with serving(app) as url:
            home, project = tmp_path / "home", tmp_path / "project"
            home.mkdir()
            project.mkdir()
            done = subprocess.run(
                CLAUDE.argv(RUN_BIG, False),
                env=CLAUDE.configure(home, project, url),
                cwd=project,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
                stdin=subprocess.DEVNULL,
            )
            assert done.returncode == 0, done.stderr[-3000:]
            bodies = [
                (h, b) for p, h, b in provider.accepted if p == "/v1/messages" and b.get("tools")
            ]
            preview = next(
                t for _, b in bodies for t in results(CLAUDE.fmt, b) if "full output saved to" in t
            )
            listed = httpx.get(url + "/ui/api/sessions", timeout=30).json()["sessions"]
            (session,) = [row["session"] for row in listed if row["spills"]]

            page = browser.new_page(viewport={"width": 1500, "height": 900})
            # The page runs under the proxy's Content-Security-Policy (issue 43, item 4):
            # whatever it blocks, Chromium reports on the console.
            refused: list[str] = []
            page.on(
                "console",
                lambda message: (
                    refused.append(message.text)
                    if "Content Security Policy" in message.text
                    else None
                ),
            )
            page.goto(url + "/ui/")
            row = page.locator(f'tr[data-session="{session}"]')
            row.wait_for()
            assert row.locator("td").first.inner_text() == "Claude Code"

            row.locator("a").click()
            spill = page.locator('.step[data-kind="spilled"]').filter(has_text="row 0001 y")
            spill.wait_for()
            assert spill.locator("pre.seen").inner_text() == preview.rstrip("\n")
            spill.locator("button.fetch-full").click()
            full = spill.locator("pre.full-text")
            page.wait_for_function(
                "() => { const p = document.querySelector('pre.full-text');"
                " return p && !p.textContent.startsWith('Reading'); }"
            )
            assert big_output("y").rstrip("\n") in full.inner_text()
            # The agent read it back as the preview said (sed -n in Bash): the request that
            # carries the call says so, the session's facts count it (issue 45, item 2),
            # and the page's own read of the spill store is no recall of the agent's.
            read_back = page.locator('.readback-call[data-kind="spill_file"]')
            read_back.wait_for()
            assert read_back.inner_text().startswith("read back: Bash of ")
            assert "/tool-results/" in read_back.inner_text()
            assert "(spilled by budget)" in read_back.inner_text()
            page.locator("p.readback").filter(
                has_text="1 read-back of what the proxy hid, costing $"
            ).wait_for()
            page.locator("#facts").filter(
                has_text="Read-backs (what the proxy hid, read again)"
            ).wait_for()
            assert b"chatcli_proxy_recalls_total{" not in proxy.metrics.exposition()

            # An interrupted call, as an agent without its own record of it sends the
            # request: the open page shows the repair when it comes, without a reload.
            headers, sent = next((h, b) for h, b in reversed(bodies) if results(CLAUDE.fmt, b))
            forwarded = {k: v for k, v in headers.items() if k not in ("host", "content-length")}
            repaired = httpx.post(
                url + "/v1/messages",
                json=without_results(CLAUDE.fmt, sent),
                headers=forwarded,
                timeout=60,
            )
            assert repaired.status_code == 200, repaired.text
            inserted = page.locator('.step[data-kind="synthetic_result"] pre.seen').first
            inserted.wait_for(timeout=15_000)
            assert "Tool result missing" in inserted.inner_text()

            answered = len(provider.cache.reported)  # type: ignore[union-attr]
            assert wait_for(lambda: proxy.ledger.total()["requests"] == answered)
            assert wait_for(lambda: len(ledger_file.read_text().splitlines()) == answered)
            from_file = ledger_cli("--file", str(ledger_file), session)
            assert from_file["saved_dollars"] > 0
            saving = page.locator("#saving")
            page.wait_for_function(
                "(expected) => Number(document.querySelector('#saving').dataset.dollars)"
                " === expected",
                arg=from_file["saved_dollars"],
            )
            assert saving.inner_text() == f"${from_file['saved_dollars']:.4f}"
            assert page.locator("#chart polyline").count() == 2
            page.screenshot(path=str(shots / "session.png"), full_page=True)

            page.click("#nav-proxy")
            page.locator("#memory").wait_for()
            widths = page.eval_on_selector_all(
                "#memory .bar > span", "s => s.map(e => e.style.width)"
            )
            assert widths and all(w.endswith("%") for w in widths), widths
            assert upstream in page.locator("#upstreams").inner_text()
            assert "default" in page.locator("#reloads").inner_text()
            page.screenshot(path=str(shots / "proxy.png"), full_page=True)

            # Back on the sessions page, the session's counts are the console's: a repair
            # for each call whose result the request left out.
            page.click("#nav-sessions")
            cells = page.locator(f'tr[data-session="{session}"] td')
            cells.first.wait_for()
            texts = [cells.nth(i).inner_text() for i in range(cells.count())]
            row = httpx.get(url + "/ui/api/sessions").json()["sessions"]
            (shown,) = [r for r in row if r["session"] == session]
            calls = sum(1 for e in events(CLAUDE.fmt, sent) if e.kind == "call")
            assert shown["repairs"] == calls and shown["spills"] >= 1
            assert texts[0] == "Claude Code"
            assert texts[-4:-1] == [str(shown[k]) for k in ("repairs", "spills", "compactions")]
            page.screenshot(path=str(shots / "sessions.png"), full_page=True)

            # The key filter asks the proxy for one caller's answers (issue 44, item 3):
            # Claude Code's key shows its session; another key, none and a zero total.
            assert shown["caller"]
            page.fill("#key-filter", "0000000000000000")
            page.press("#key-filter", "Enter")
            page.wait_for_function(
                "() => !document.querySelector('#sessions tbody tr[data-session]')"
            )
            page.fill("#key-filter", shown["caller"])
            page.press("#key-filter", "Enter")
            page.locator(f'tr[data-session="{session}"]').wait_for()
            logger.warning("console screenshots: %s", shots)
            assert refused == []


def test_a_long_session_is_shown_a_page_at_a_time_and_goes_on_live(
    tmp_path: Path, browser: Any, store: dict[str, str], screenshots: Path
) -> None:
    from proxy_stack import running

    stand_in = Provider()
    with (
        serving(stand_in.app()) as upstream,
        running((stand_in, upstream), tmp_path, **store) as stack,
    ):
        headers = {
            "x-api-key": "sk-ant-test",
            "anthropic-version": "2023-06-01",
            "x-chatcli-session": "long",
        }

        def send(n: int) -> None:
            call = {"type": "tool_use", "id": f"toolu_{n:04d}", "name": "Bash", "input": {"n": n}}
            messages = [
                {"role": "user", "content": f"Step {n}."},
                {"role": "assistant", "content": [call]},
                {"role": "user", "content": "Go on."},
            ]
            body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": messages}
            answer = client.post(stack.url + "/v1/messages", json=body, headers=headers)
            assert answer.status_code == 200, answer.text

        with httpx.Client(timeout=60) as client:
            for n in range(1, 301):
                send(n)
            assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 300)

            page = browser.new_page(viewport={"width": 1200, "height": 900})
            refused: list[str] = []
            page.on(
                "console",
                lambda message: (
                    refused.append(message.text)
                    if "Content Security Policy" in message.text
                    else None
                ),
            )
            polls: list[int] = []
            page.on(
                "response",
                lambda r: (
                    polls.append(int(r.headers["content-length"])) if "after=" in r.url else None
                ),
            )
            page.goto(stack.url + "/ui/#/session/long")
            cards = page.locator(".card.request")
            cards.first.wait_for()
            drawn = [int(cards.nth(i).get_attribute("data-n")) for i in range(cards.count())]
            assert drawn == list(range(300, 275, -1))  # the latest page, newest first
            assert "300 kept, 25 shown" in page.locator("#requests-heading").inner_text()
            page.evaluate("document.querySelector('.card.request[data-n=\"290\"]').kept = 1")

            page.click("#older")
            page.locator('.card.request[data-n="251"]').wait_for()
            assert cards.count() == 50
            assert "300 kept, 50 shown" in page.locator("#requests-heading").inner_text()

            # A new request shows up at the top, its bill with it, without a reload and
            # without drawing the others again.
            send(301)
            page.locator('.card.request[data-n="301"] table.tokens').wait_for(timeout=15_000)
            assert cards.first.get_attribute("data-n") == "301" and cards.count() == 51
            assert page.evaluate(
                "document.querySelector('.card.request[data-n=\"290\"]').kept === 1"
            )
            page.wait_for_timeout(4500)  # polls with nothing new: each a few hundred bytes
            assert len(polls) >= 3 and max(polls[-2:]) < 2048
            page.screenshot(path=str(screenshots / "long-session.png"))

            # A model ledger.prices does not name reads "not priced" (issue 45, item 3),
            # in the list and on its page: never $0.0000, as if free, nor a saving.
            unpriced = {
                "model": "mystery-model-1",
                "max_tokens": 10,
                "messages": [{"role": "user", "content": "Hello."}],
            }
            answer = client.post(
                stack.url + "/v1/messages",
                json=unpriced,
                headers={**headers, "x-chatcli-session": "unpriced"},
            )
            assert answer.status_code == 200, answer.text
            assert wait_for(lambda: stack.proxy.ledger.total()["unpriced"] == 1)
            page.goto(stack.url + "/ui/#/")
            row = page.locator('tr[data-session="unpriced"]')
            row.wait_for()
            assert row.locator(".unpriced").count() == 3  # billed, without, saved
            assert "$0.0000" not in row.inner_text() and row.locator("td.saved").count() == 0
            page.goto(stack.url + "/ui/#/session/unpriced")
            page.locator(".card.request table.tokens").wait_for()
            assert "not priced" in page.locator(".kv").first.inner_text()
            assert "$0.0000" not in page.locator("#view").inner_text()
            assert refused == []
