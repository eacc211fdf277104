"""The proxy's resident memory with many sessions: at start, at its peak, after the run,
after the sessions went idle, and after a ``DELETE /sessions/{id}`` of each.

Three workloads, each against a fresh ``chatcli-mw serve`` (its memory read from
``/proc``) in front of the tests' provider stand-in:

* ``sessions``: N conversations of about S MB each (real tool outputs from the
  trajectories, made distinct per conversation), one request each, C at a time;
* ``bodies``: K request bodies of B MB at once, each its own session;
* ``conversations``: N growing conversations at once, T requests each, the history
  growing to about S KB (the 200-conversation run of issue 27).

    python benchmarks/memory_benchmark.py sessions [--count 40] [--mb 4.5]
    python benchmarks/memory_benchmark.py bodies [--count 8] [--mb 30]
    python benchmarks/memory_benchmark.py conversations [--count 200] [--turns 10] [--kb 500]

``--env KEY=VALUE`` sets a variable of the proxy's (``CHATCLI_PROXY__SESSION_MEMORY_BYTES``,
``MALLOC_ARENA_MAX``...). Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from proxy_benchmark import free_port, wait_until_up

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "trajectories"
HEADERS = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}
UPSTREAM = """
import sys
sys.path.insert(0, {tests!r})
import uvicorn
from stand_in import Provider, Reply
provider = Provider(script=lambda fmt, body: Reply(text="done"), record=False,
                    context_chars=10**12)
uvicorn.run(provider.app(), host="127.0.0.1", port={port}, log_level="warning",
            timeout_keep_alive=300)
"""
# (Idle connections stay open as a provider's do: uvicorn's 5 s closes some just as the
# proxy reuses them under 200 conversations, a 502 that is no part of what is measured.)


@contextmanager
def servers(spill: str, env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """The upstream and the proxy in front of it: the proxy's URL and pid."""
    up_port, proxy_port = free_port(), free_port()
    upstream_code = UPSTREAM.format(tests=str(REPO / "tests"), port=up_port)
    upstream = subprocess.Popen([sys.executable, "-c", upstream_code])
    proxy_env = {
        **os.environ, "CHATCLI_SPILL__ROOT": spill, "CHATCLI_PROXY__ACCESS_LOG": "false",
        "CHATCLI_PROXY__MAX_BODY_BYTES": str(256 * 1024 * 1024), **env,
    }  # fmt: skip
    proxy = subprocess.Popen(
        [sys.executable, "-m", "middleware", "serve", "--port", str(proxy_port),
         "--anthropic-upstream", f"http://127.0.0.1:{up_port}"],
        env=proxy_env, cwd=REPO, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        proxy_url = f"http://127.0.0.1:{proxy_port}"
        wait_until_up(f"http://127.0.0.1:{up_port}")
        wait_until_up(proxy_url)
        yield proxy_url, proxy.pid
    finally:
        for process in (proxy, upstream):
            process.terminate()
            process.wait(timeout=30)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def tool_outputs(data: Path) -> list[str]:
    """The text of every tool result in the Claude Code transcripts."""
    from middleware.replay.transcripts import load_transcripts

    texts = []
    for file in sorted(data.glob("claude-code/*.jsonl")):
        for transcript in load_transcripts(file):
            for message in transcript.messages:
                for block in message.get("content") if isinstance(
                    message.get("content"), list) else ():  # fmt: skip
                    if block.get("type") != "tool_result":
                        continue
                    content = block.get("content")
                    parts = [content] if isinstance(content, str) else [
                        p.get("text", "") for p in content or [] if isinstance(p, dict)
                    ]  # fmt: skip
                    texts.extend(p for p in parts if p)
    return texts


def turn(texts: list[str], rnd: random.Random, n: int, i: int, size: int) -> list[dict[str, Any]]:
    """An assistant turn of parallel Bash calls and their results, about ``size``
    characters of real outputs (one each), marked as conversation ``n``'s (no two
    conversations share a result)."""
    calls, results, total = [], [], 0
    while total < size:
        output = rnd.choice(texts)
        total += len(output)
        call = f"toolu_{n:04d}_{i:05d}_{len(calls)}"
        calls.append({"type": "tool_use", "id": call, "name": "Bash",
                      "input": {"command": f"cat f{i}_{len(calls)}"}})  # fmt: skip
        results.append({"type": "tool_result", "tool_use_id": call,
                        "content": f"{output}\n[conversation {n}, call {call}]"})  # fmt: skip
    return [
        {"role": "assistant", "content": [{"type": "text", "text": f"Step {i}."}, *calls]},
        {"role": "user", "content": results},
    ]


def history(texts: list[str], n: int, chars: int, per_turn: int) -> list[dict[str, Any]]:
    rnd = random.Random(n)
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Task {n}: fix the bug."}]
    size, i = 0, 0
    while size < chars:
        messages += turn(texts, rnd, n, i, per_turn)
        size += sum(len(block["content"]) + 250 for block in messages[-1]["content"])
        i += 1
    return messages


def body(messages: list[dict[str, Any]]) -> bytes:
    return json.dumps({"model": "bench", "max_tokens": 100, "messages": messages}).encode()


class Watch:
    """The proxy's resident memory, sampled in the background."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.start = rss_mb(pid)
        self.peak = self.start

    async def run(self) -> None:
        while True:
            self.peak = max(self.peak, rss_mb(self.pid))
            await asyncio.sleep(0.05)


async def post_all(
    url: str, bodies: list[tuple[str, bytes]], concurrent: int, watch: Watch
) -> list[int]:
    limits = httpx.Limits(max_connections=concurrent, max_keepalive_connections=concurrent)
    gate = asyncio.Semaphore(concurrent)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:

        async def post(session: str, data: bytes) -> int:
            async with gate:
                answer = await client.post(
                    url + "/v1/messages", content=data,
                    headers={**HEADERS, "content-type": "application/json",
                             "x-chatcli-session": session},
                )  # fmt: skip
                if answer.status_code != 200:
                    print(f"  {session}: {answer.status_code} {answer.text[:300]}")
                return answer.status_code

        watcher = asyncio.create_task(watch.run())
        try:
            return await asyncio.gather(*(post(s, d) for s, d in bodies))
        finally:
            watcher.cancel()


async def converse(  # noqa: PLR0917 (the workload's parameters)
    url: str, texts: list[str], count: int, turns: int, chars: int, watch: Watch
) -> list[int]:
    """``count`` conversations at once, each sending ``turns`` growing requests."""
    per_turn = max(chars // turns, 500)
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:

        async def one(n: int) -> list[int]:
            rnd = random.Random(n)
            messages: list[dict[str, Any]] = [{"role": "user", "content": f"Task {n}."}]
            codes = []
            for i in range(turns):
                messages = [*messages, *turn(texts, rnd, n, i, per_turn)]
                answer = await client.post(
                    url + "/v1/messages", content=body(messages),
                    headers={**HEADERS, "content-type": "application/json",
                             "x-chatcli-session": f"c{n}"},
                )  # fmt: skip
                codes.append(answer.status_code)
                if answer.status_code != 200:
                    print(f"  conversation {n}, request {i}: {answer.status_code} "
                          f"{answer.text[:300]}")  # fmt: skip
            return codes

        watcher = asyncio.create_task(watch.run())
        try:
            return [code for codes in await asyncio.gather(*map(one, range(count)))
                    for code in codes]  # fmt: skip
        finally:
            watcher.cancel()


def metric(url: str, name: str) -> str:
    for line in httpx.get(url + "/metrics", timeout=30).text.splitlines():
        if line.startswith(name + " "):
            return line.split()[1]
    return "-"


def report(url: str, pid: int, watch: Watch, sessions: list[str], idle: float) -> None:
    after = rss_mb(pid)
    state = metric(url, "chatcli_proxy_session_state_bytes")
    evictions = metric(url, "chatcli_proxy_session_evictions_total")
    print(f"  RSS start {watch.start:6.0f} MB   peak {watch.peak:6.0f} MB   "
          f"after the run {after:6.0f} MB")  # fmt: skip
    cache = metric(url, "chatcli_proxy_cache_bytes")
    if state != "-":
        print(f"  session state {float(state) / 2**20:.0f} MB, cache {float(cache) / 2**20:.0f} MB "
              f"(estimates), {float(evictions):.0f} evictions")  # fmt: skip
    if idle:
        time.sleep(idle)
        print(f"  after {idle:g} s idle {rss_mb(pid):6.0f} MB")
    with httpx.Client(timeout=120) as client:
        for session in sessions:
            client.delete(f"{url}/sessions/{session}")
    time.sleep(6)  # the allocator is given its free memory back in the background
    print(f"  after DELETE of all {rss_mb(pid):6.0f} MB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=["sessions", "bodies", "conversations"])
    parser.add_argument("--count", type=int, help="sessions, bodies or conversations")
    parser.add_argument("--mb", type=float, help="size of each session or body")
    parser.add_argument("--kb", type=int, default=500, help="size a conversation grows to")
    parser.add_argument("--turns", type=int, default=10, help="requests per conversation")
    parser.add_argument("--concurrent", type=int, default=4, help="sessions at once")
    parser.add_argument("--idle", type=float, default=0.0, help="seconds idle before DELETE")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the proxy")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"skipped: no trajectories at {args.data}")
        return 0
    env = dict(item.split("=", 1) for item in args.env)
    texts = tool_outputs(args.data)
    with tempfile.TemporaryDirectory() as spill, servers(spill, env) as (url, pid):
        watch = Watch(pid)
        if args.workload == "conversations":
            count = args.count or 200
            print(f"{count} conversations at once, {args.turns} requests each, "
                  f"growing to about {args.kb} KB")  # fmt: skip
            started = time.perf_counter()
            codes = asyncio.run(converse(url, texts, count, args.turns, args.kb * 1000, watch))
            sessions = [f"c{n}" for n in range(count)]
        else:
            count = args.count or (40 if args.workload == "sessions" else 8)
            mb = args.mb or (4.5 if args.workload == "sessions" else 30.0)
            concurrent = args.concurrent if args.workload == "sessions" else count
            per_turn = 1_500 if args.workload == "sessions" else 20_000
            bodies = [(f"s{n}", body(history(texts, n, int(mb * 1e6), per_turn)))
                      for n in range(count)]  # fmt: skip
            sizes = [len(b) for _, b in bodies]
            print(f"{args.workload}: {count} bodies of {min(sizes) / 1e6:.1f}-"
                  f"{max(sizes) / 1e6:.1f} MB, {concurrent} at once")  # fmt: skip
            started = time.perf_counter()
            codes = asyncio.run(post_all(url, bodies, concurrent, watch))
            del bodies
            sessions = [f"s{n}" for n in range(count)]
        took = time.perf_counter() - started
        failed = sum(1 for code in codes if code != 200)
        print(f"  {len(codes)} requests in {took:.1f} s, {failed} not 200")
        report(url, pid, watch, sessions, args.idle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
