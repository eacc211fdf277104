"""What the console's record of a request costs on the request that has the most to record
(issue 43, item 5): one request whose history ends with thousands of tool calls that have
no result (the agent was stopped), so pairing inserts a result for each: as many actions.

Two ``chatcli-mw serve`` processes, one with ``proxy.console.enabled`` on and one with it
off, in front of the tests' provider stand-in (in this process); each is sent the same
request body in a session of its own, in turn, ``--repeat`` times. The CPU time of each
server process is read from ``/proc`` around each request; the access log gives the
milliseconds of the pipeline (``process_ms``) and of the console's record (``console_ms``,
with the console on). Linux only.

    python benchmarks/console_recording.py [--calls 8000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from proxy_stack import access_log, serve_process_pid  # noqa: E402
from servers import serving  # noqa: E402
from stand_in import Provider, Reply  # noqa: E402
from waiting import wait_for  # noqa: E402

HEADERS = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}


def interrupted(calls: int) -> bytes:
    """A request whose last reply made ``calls`` calls and got no result for any."""
    made = [{"type": "tool_use", "id": f"toolu_{i:05d}", "name": "Bash",
             "input": {"command": f"echo {i}"}} for i in range(calls)]  # fmt: skip
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": made},
        {"role": "user", "content": "Go on."},
    ]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages}
    return json.dumps(body).encode()


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid``, threads included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=8000, help="calls without a result")
    parser.add_argument("--repeat", type=int, default=3, help="requests to each server")
    args = parser.parse_args(argv)
    body = interrupted(args.calls)
    provider = Provider(script=lambda fmt, sent: Reply(text="done"), record=False,
                        context_chars=10**12)  # fmt: skip
    figures: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="console-recording-") as work, ExitStack() as stack:
        upstream = stack.enter_context(serving(provider.app()))
        servers = {}
        for name, enabled in (("on", True), ("off", False)):
            log = Path(work) / f"access-{name}.log"
            overrides = {"proxy.console.enabled": enabled, "spill.root": f"{work}/spill-{name}",
                         "proxy.max_body_bytes": 256 * 1024 * 1024}  # fmt: skip
            url, pid = stack.enter_context(serve_process_pid(upstream, overrides, log=log))
            servers[name] = (url, pid, log)
            figures[name] = {"cpu": [], "process_ms": [], "console_ms": []}
        with httpx.Client(timeout=600) as client:
            for _ in range(args.repeat):
                for name, (url, pid, log) in servers.items():
                    headers = {**HEADERS, "x-chatcli-session": uuid.uuid4().hex}
                    before = cpu_seconds(pid)
                    answer = client.post(url + "/v1/messages", content=body, headers=headers)
                    answer.raise_for_status()
                    line = wait_for_line(log, len(figures[name]["cpu"]) + 1)
                    figures[name]["cpu"].append(cpu_seconds(pid) - before)
                    figures[name]["process_ms"].append(line["process_ms"])
                    figures[name]["console_ms"].append(line.get("console_ms", 0.0))
                    assert line["repairs"] == args.calls, line
    print(f"one request of {args.calls:,} calls without a result, {args.repeat} runs "
          "(median; CPU of the server process)")  # fmt: skip
    print(f"{'console':<8} {'CPU s':>8} {'process_ms':>11} {'console_ms':>11}")
    for name, got in figures.items():
        print(f"{name:<8} {statistics.median(got['cpu']):>8.2f} "
              f"{statistics.median(got['process_ms']):>11.1f} "
              f"{statistics.median(got['console_ms']):>11.1f}")  # fmt: skip
    ratio = statistics.median(figures["on"]["cpu"]) / statistics.median(figures["off"]["cpu"])
    print(f"on / off: {ratio:.2f}x CPU")
    return 0


def wait_for_line(log: Path, count: int) -> dict[str, Any]:
    """The ``count``-th access log line of a server, once it is written."""
    if not wait_for(lambda: len(access_log(log)) >= count, 300):
        raise RuntimeError(f"no access log line {count} in {log}")
    return access_log(log)[count - 1]


if __name__ == "__main__":
    sys.exit(main())
