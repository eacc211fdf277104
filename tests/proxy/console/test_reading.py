"""The console reads right, tried as a new user would (issue 45, item 6): a real
``chatcli-mw serve`` (command-line options, variables, the proxy's own settings) holding
the sessions of several agents, a long session name, tags, callers' keys, priced and
unpriced models and a spilled output, read in Chromium at 1,400 pixels.

Every column of the sessions list lines up with its header and fits (or, in a narrower
window, scrolls in its box with its header); dates read in one form, ISO 8601, whatever
the browser's locale, as numbers do; a spill's reason reads in words, its key still in
reach; and the proxy page says who set each key (the command line, a variable, the proxy
itself), never "override".
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest
from prompt_cache import PromptCache
from proxy_stack import serve_process
from servers import serving
from stand_in import Provider
from waiting import wait_for

#: Slow (seconds each): `-m "not slow"` leaves it out of a quick run.
pytestmark = pytest.mark.slow

#: The window a new user opens the console in.
WIDE = 1400
PRICES = {"input": 3, "output": 15, "cache_read": 0.3, "cache_write_5m": 3.75, "cache_write_1h": 6}
LONG_NAME = (
    "team-infra/nightly-refactor-of-the-billing-service-2026-03-14-run-17"
    "-with-a-long-descriptive-name"
)
#: The output the budget step spills: over its 5,000-character cap.
BIG = "\n".join(f"line {i:04d} " + "x" * 90 for i in range(200))
#: A date in any form but ISO 8601's (02/12/2026, 12.02.2026, 2/12/26).
OTHER_DATE = re.compile(r"\b\d{1,2}[./]\d{1,2}[./]\d{2,4}\b")


class Console(NamedTuple):
    url: str
    #: The sessions as /ui/api/sessions lists them.
    sessions: list[dict[str, Any]]


def anthropic(model: str, results: int) -> dict[str, Any]:
    """A coding turn of ``results`` long outputs of ``Bash``, each answering its call."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing build."}]
    for n in range(results):
        call = {
            "type": "tool_use",
            "id": f"toolu_{n:02d}",
            "name": "Bash",
            "input": {"command": f"cat build-{n}.log"},
        }
        result = {"type": "tool_result", "tool_use_id": call["id"], "content": BIG}
        messages += [
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ]
    return {
        "model": model,
        "max_tokens": 20,
        "messages": messages,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
    }


GEMINI_CALL = {"name": "run_shell_command", "args": {"command": "ls"}, "id": "ls-1"}
GEMINI_TURN: dict[str, Any] = {
    "contents": [
        {"role": "user", "parts": [{"text": "Explain this repository."}]},
        {"role": "model", "parts": [{"functionCall": GEMINI_CALL}]},
        {"role": "user", "parts": [{"functionResponse": {
            "name": "run_shell_command", "id": "ls-1", "response": {"output": "README.md"}}}]},
    ],
    "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}],
}  # fmt: skip


def fill(url: str) -> None:
    """The sessions of several agents, as each names its session and itself."""
    anthropic_headers = {"anthropic-version": "2023-06-01"}
    sent: list[tuple[str, dict[str, str], dict[str, Any]]] = [
        ("/v1/messages", {"x-claude-code-session-id": "8cfcd341-faa8-4ed2-8828-2b0e6683395a",
                          "user-agent": "claude-cli/2.1.197 (external, cli)",
                          "x-api-key": "sk-ant-dev-1"},
         anthropic("claude-stand-in", 1)),
        ("/v1/responses", {"session-id": "01a2358d-05a8-7ed3-a4d9-cf4a8339ed86",
                           "user-agent": "codex_cli_rs/0.171.0", "authorization": "Bearer sk-2"},
         {"model": "gpt-5-codex", "input": [{"role": "user", "content": "List the files."}]}),
        ("/v1/messages", {"x-session-id": "ses_dca72d815ffeAKF5t6Xcs6dMMx",
                          "user-agent": "opencode/1.18.33", "x-api-key": "sk-ant-dev-3"},
         anthropic("claude-stand-in", 0)),
        # A Gemini CLI run's request after its first reply (one before it would wait to be
        # joined to its conversation: middleware/conversations/joining.py).
        ("/v1beta/models/gemini-2.5-pro:generateContent",
         {"user-agent": "GeminiCLI/0.61.0 (linux; x64)", "x-goog-api-key": "g-4"}, GEMINI_TURN),
        # A client that names no session: known by how its conversation opens.
        ("/v1/messages", {"x-api-key": "sk-ant-dev-5"}, anthropic("claude-stand-in", 0)),
    ]  # fmt: skip
    for turns in (1, 2, 3):  # a long name, tags and a key of its own, its outputs spilled
        sent.append(("/v1/messages", {"x-chatcli-session": LONG_NAME, "x-api-key": "sk-ant-ci",
                                      "x-chatcli-tags": "team=infra,env=ci"},
                     anthropic("claude-stand-in", turns)))  # fmt: skip
    sent.append(("/v1/messages", {"x-chatcli-session": "experiment-local-model",
                                  "x-api-key": "sk-ant-lab", "x-chatcli-tags": "team=lab"},
                 anthropic("mystery-model-1", 0)))  # fmt: skip
    with httpx.Client(timeout=60) as client:
        for path, named, body in sent:
            headers = {**anthropic_headers, **named} if path == "/v1/messages" else named
            answer = client.post(url + path, json=body, headers=headers)
            assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    folder = tmp_path_factory.mktemp("console")
    provider = Provider(cache=PromptCache())
    keys = {
        "spill.root": str(folder / "spill"),
        "ledger.prices.claude-stand-in": PRICES,
        "ledger.url": f"sqlite:///{folder / 'records.sqlite'}",
    }
    with serving(provider.app()) as upstream, serve_process(upstream, keys) as url:
        fill(url)

        def listed() -> list[dict[str, Any]]:
            rows: list[dict[str, Any]] = httpx.get(url + "/ui/api/sessions").json()["sessions"]
            return rows

        assert wait_for(lambda: sum(row["requests"] for row in listed()) == 9)
        yield Console(url, listed())


def opened(browser: Any, url: str, width: int = WIDE, **context: Any) -> Any:
    page = browser.new_context(viewport={"width": width, "height": 900}, **context).new_page()
    page.goto(url)
    return page


#: Each column's header and cells, measured: their edges, and any cell whose content is
#: wider than the cell (cut or spilling over its neighbours).
MEASURE = """table => {
  const edges = (cell) => { const r = cell.getBoundingClientRect(); return [r.left, r.right]; };
  const rows = [...table.querySelectorAll("tbody tr")].map((tr) => [...tr.cells].map(edges));
  const head = [...table.querySelectorAll("thead th")].map(edges);
  const over = [...table.querySelectorAll("th, td")]
    .filter((c) => c.scrollWidth > c.clientWidth + 1).map((c) => c.textContent);
  let box = table.parentElement;  // the nearest box that scrolls sideways
  while (box && !["auto", "scroll"].includes(getComputedStyle(box).overflowX)) {
    box = box.parentElement;
  }
  return { head, rows, over, table: table.getBoundingClientRect().width,
           box: box ? { width: box.clientWidth, scroll: box.scrollWidth } : null,
           page: document.documentElement.scrollWidth, window: window.innerWidth };
}"""


def check_columns(measured: dict[str, Any]) -> None:
    head = measured["head"]
    for row in measured["rows"]:
        assert len(row) == len(head)
        for (left, right), (h_left, h_right) in zip(row, head, strict=True):
            assert abs(left - h_left) < 0.5 and abs(right - h_right) < 0.5, (row, head)
    assert measured["over"] == []


def test_every_column_of_the_sessions_list_lines_up_with_its_header_and_fits_or_scrolls(
    browser: Any, console: Console, screenshots: Path
) -> None:
    page = opened(browser, console.url + "/ui/")
    page.locator(f'tr[data-session="{LONG_NAME}"]').wait_for()
    agents = {row["agent"] for row in console.sessions}
    assert {"Claude Code", "Codex", "opencode", "Gemini CLI", "SDK"} <= agents
    page.screenshot(path=str(screenshots / "sessions-1400.png"), full_page=True)
    measured = page.eval_on_selector("#sessions", MEASURE)
    check_columns(measured)
    # At 1,400 pixels it fits: neither the page nor the table scrolls sideways.
    assert measured["page"] <= measured["window"], measured
    assert measured["box"] is not None and measured["box"]["scroll"] <= measured["box"]["width"]

    # In a narrow window the table scrolls in its own box, its header with it: the page
    # (the header bar, the filters) stays where it is.
    page.set_viewport_size({"width": 800, "height": 900})
    measured = page.eval_on_selector("#sessions", MEASURE)
    assert measured["page"] <= measured["window"], measured
    assert measured["box"]["scroll"] > measured["box"]["width"]
    page.eval_on_selector("#sessions", "t => { t.parentElement.scrollLeft = 1e6; }")
    check_columns(page.eval_on_selector("#sessions", MEASURE))
    page.screenshot(path=str(screenshots / "sessions-800.png"), full_page=True)


def test_dates_read_in_iso_8601_on_every_page_whatever_the_locale(
    browser: Any, console: Console
) -> None:
    context = {"locale": "de-DE", "timezone_id": "UTC"}  # 12.02.2026, 1.234 if it followed it
    page = opened(browser, console.url + "/ui/", **context)
    page.locator(f'tr[data-session="{LONG_NAME}"]').wait_for()
    by_session = {row["session"]: row for row in console.sessions}
    for session, row in by_session.items():
        shown = page.locator(f'tr[data-session="{session}"] td').last.inner_text()
        assert shown == datetime.fromtimestamp(row["last"], UTC).strftime("%Y-%m-%d %H:%M:%S")
        tokens = page.locator(f'tr[data-session="{session}"] td').nth(3).inner_text()
        assert tokens == f"{row['billed']['input']:,}"  # numbers as the command line says them
    assert re.fullmatch(r"live · updated \d{2}:\d{2}:\d{2}", page.locator("#status").inner_text())
    texts = [page.locator("#view").inner_text()]

    page.goto(console.url + "/ui/#/session/" + LONG_NAME)
    page.locator(".card.request").first.wait_for()
    facts = page.locator("#facts").inner_text()
    last = by_session[LONG_NAME]["last"]
    assert datetime.fromtimestamp(last, UTC).strftime("%Y-%m-%d %H:%M:%S") in facts
    card = page.locator(".card.request .muted").first.inner_text()
    assert re.search(r"· \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} ·", card), card
    texts.append(page.locator("#view").inner_text())

    page.goto(console.url + "/ui/#/proxy")
    page.locator("#memory").wait_for()
    texts.append(page.locator("#view").inner_text())
    for text in texts:
        assert OTHER_DATE.findall(text) == []
        assert "$-" not in text  # a loss reads -$0.0002


def test_a_spill_says_why_in_words_and_keeps_its_key_in_reach(
    browser: Any, console: Console
) -> None:
    page = opened(browser, console.url + "/ui/#/session/" + LONG_NAME)
    step = page.locator('.step[data-kind="spilled"]').first
    step.wait_for()
    words = step.inner_text()
    assert "result_cap" not in words, words
    assert "longer than its cap of 5,000 characters, set by budget.max_result_chars" in words
    reason = step.locator(".reason")
    assert reason.locator("code").inner_text() == "budget.max_result_chars"
    assert reason.get_attribute("title") == "reason: result_cap"


def test_a_session_says_where_its_key_came_from_in_words(browser: Any, console: Console) -> None:
    (unnamed,) = [row for row in console.sessions if row["source"] == "opening"]
    page = opened(browser, console.url + "/ui/#/session/" + unnamed["session"])
    facts = page.locator("#facts .kv > span")  # label, value, label, value...
    facts.first.wait_for()
    assert facts.nth(2).inner_text() == "Session key from"
    said = facts.nth(3)
    assert said.inner_text() == "a digest of how the conversation opens (no session named)"
    assert said.locator(".source").get_attribute("title") == "source: opening"
    page.goto(console.url + "/ui/#/session/" + LONG_NAME)
    page.locator("#facts .source code").wait_for()
    assert facts.nth(3).inner_text() == "the header x-chatcli-session"


def test_the_proxy_page_says_who_set_each_key_and_never_override(
    browser: Any, console: Console
) -> None:
    page = opened(browser, console.url + "/ui/#/proxy")
    rows = page.locator("#policy-set tr")
    rows.nth(1).wait_for()
    set_by = {}
    for i in range(1, rows.count()):
        key, _, origin = (rows.nth(i).locator("td").nth(j).inner_text() for j in range(3))
        set_by[key] = origin
    assert "override" not in set_by.values(), set_by
    assert set_by["proxy.port"] == "command line --port"
    assert set_by["proxy.upstreams.gemini"] == "command line --upstream"
    assert set_by["ledger.url"] == "env CHATCLI_LEDGER__URL"
    assert set_by["spill.keep"].startswith("the proxy (")


def test_an_option_the_policy_refuses_names_the_option_that_set_it() -> None:
    script = Path(sys.executable).parent / "chatcli-mw"
    done = subprocess.run(
        [str(script), "serve", "--port", "1", "--log-format", "xml"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "(set by command line --log-format)" in done.stderr, done.stderr
