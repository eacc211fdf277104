"""What the console's page of a long session costs (issue 43, item 6): the bytes the page
fetches, the time to draw it in a real browser, and how long the page is frozen while it
redraws, for a session of thousands of requests that each spilled several outputs.

The session is fed through a real proxy (in this process, in front of the tests' provider
stand-in): ``--requests`` requests of one session, each with ``--spills`` new tool outputs
big enough to be spilled, so each request's record holds that many actions and the texts
the model saw instead. Then headless Chromium (Debian's ``chromium``, driven by
Playwright) opens the session's page and the script reads:

* the bytes of the page's first answer and of each poll while nothing changes (every
  answer of ``/ui/api/sessions/...`` the page fetched, from the browser's side);
* the time from opening the page to its requests being drawn;
* the longest task on the page's main thread (a frozen page), while it loads, then while
  it stays open for ``--watch`` seconds, a new request coming in halfway.

The records go to a SQLite file in a temporary folder, or to ``--url`` (a PostgreSQL
database, for one: ``postgresql://USER@HOST/DATABASE``, which must be empty).

    python benchmarks/console_pages.py [--requests 2500] [--spills 6] [--watch 10] [--url URL]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from proxy_stack import running  # noqa: E402
from servers import serving  # noqa: E402
from stand_in import Provider, Reply  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
SESSION = "console-pages-benchmark"
HEADERS = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01",
           "content-type": "application/json", "x-chatcli-session": SESSION}  # fmt: skip
#: Kept by the page: every long task (over 50 ms) of its main thread, and what it fetched.
WATCH = """
window.__long = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__long.push([entry.startTime, entry.duration]);
}).observe({ type: "longtask", buffered: true });
"""


def body(n: int, spills: int) -> bytes:
    """Request ``n`` of the session: ``spills`` calls, each answered by an output of its own
    that is long enough to be spilled."""
    calls, results = [], []
    for k in range(spills):
        call = f"toolu_{n:05d}_{k}"
        calls.append({"type": "tool_use", "id": call, "name": "Bash",
                      "input": {"command": f"make step-{n}-{k}"}})  # fmt: skip
        output = "".join(f"request {n} output {k} line {i:04d}: {'build step output ' * 5}\n"
                         for i in range(400))  # fmt: skip
        results.append({"type": "tool_result", "tool_use_id": call, "content": output})
    messages = [
        {"role": "user", "content": f"Build part {n}."},
        {"role": "assistant", "content": calls},
        {"role": "user", "content": results},
    ]
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 100,
                       "messages": messages}).encode()  # fmt: skip


def feed(url: str, first: int, count: int, spills: int) -> None:
    with httpx.Client(timeout=120) as client:
        for n in range(first, first + count):
            answer = client.post(url + "/v1/messages", content=body(n, spills), headers=HEADERS)
            answer.raise_for_status()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2500)
    parser.add_argument("--spills", type=int, default=6, help="spilled outputs a request")
    parser.add_argument("--watch", type=float, default=10, help="seconds the page stays open")
    parser.add_argument("--url", help="the records database (ledger.url; default: a SQLite "
                        "file in a temporary folder)")  # fmt: skip
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    provider = Provider(script=lambda fmt, sent: Reply(text="done"), record=False,
                        context_chars=10**12)  # fmt: skip
    with (
        tempfile.TemporaryDirectory(prefix="console-pages-") as work,
        serving(provider.app()) as upstream,
        running((provider, upstream), Path(work),
                **{"ledger.url": args.url or f"sqlite:///{work}/records.sqlite"}) as stack,
    ):  # fmt: skip
        started = time.perf_counter()
        feed(stack.url, 1, args.requests, args.spills)
        fed = time.perf_counter() - started
        whole = httpx.get(stack.url + "/ui/api/sessions/" + quote(SESSION, safe=""),
                          timeout=120)  # fmt: skip
        print(
            f"{args.requests:,} requests of {args.spills} spills fed in {fed:.0f} s; "
            f"GET /ui/api/sessions/ID without a query: {len(whole.content):,} bytes"
        )
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                 args=["--no-sandbox"])  # fmt: skip
            try:
                figures = watch(browser, stack.url, args)
            finally:
                browser.close()
    for name, value in figures.items():
        print(f"{name:<48} {value}")
    return 0


def watch(browser: Any, url: str, args: argparse.Namespace) -> dict[str, str]:
    """Open the session's page, wait for it to be drawn, keep it open while a request
    comes in: the figures."""
    page = browser.new_page(viewport={"width": 1500, "height": 900})
    page.add_init_script(WATCH)
    fetched: list[tuple[float, str, int]] = []

    def answered(response: Any) -> None:
        if "/ui/api/sessions/" in response.url:  # the size the proxy said it sent
            fetched.append(
                (time.perf_counter(), response.url, int(response.headers["content-length"]))
            )

    page.on("response", answered)
    opened = time.perf_counter()
    page.goto(url + "/ui/#/session/" + quote(SESSION, safe=""))
    page.locator(".card.request").first.wait_for(timeout=600_000)
    drawn = time.perf_counter() - opened
    cards = page.locator(".card.request").count()
    loaded = page.evaluate("window.__long.map((t) => t[1])")
    settled = time.perf_counter()
    page.wait_for_timeout(args.watch * 500)
    feed(url, args.requests + 1, 1, args.spills)
    came = time.perf_counter()
    page.locator(f'.card.request[data-n="{args.requests + 1}"]').wait_for(timeout=600_000)
    shown = time.perf_counter() - came
    page.wait_for_timeout(args.watch * 500)
    during = page.evaluate(f"window.__long.slice({len(loaded)}).map((t) => t[1])")
    quiet = [size for at, _, size in fetched if settled < at < came]
    first = fetched[0][2] if fetched else 0
    return {
        "first answer the page fetched (bytes)": f"{first:,}",
        "polls while nothing changed": f"{len(quiet)}",
        "bytes of a poll while nothing changed (median)": (
            f"{statistics.median(quiet):,.0f}" if quiet else "none"
        ),
        "time to draw the requests (s)": f"{drawn:.2f}",
        "request cards drawn": f"{cards:,}",
        "longest task while loading (ms)": f"{max(loaded, default=0):.0f}",
        "a new request shown after (s)": f"{shown:.2f}",
        "longest task while open (ms)": f"{max(during, default=0):.0f}",
        "long tasks while open (over 50 ms)": f"{len(during)}",
    }


if __name__ == "__main__":
    sys.exit(main())
