"""What the proxy adds: latency against the same loopback upstream called directly (p50,
p99) on the largest real requests, throughput with 50 and 200 concurrent streaming
conversations, and memory per request in flight.

The upstream (the tests' provider stand-in, answering 1,000 characters, streamed in
7-character events) and the proxy (``chatcli-mw serve``) each run in a process of their
own; the client runs here. Both paths go through the same loopback and the same upstream,
so the difference is the proxy.

    python benchmarks/proxy_benchmark.py [--data DIR] [--requests N] [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from middleware.replay.transcripts import load_transcripts

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "trajectories"
HEADERS = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}

UPSTREAM = """
import sys
sys.path.insert(0, {tests!r})
import uvicorn
from stand_in import Provider, Reply
provider = Provider(script=lambda fmt, body: Reply(text="y" * 1000), record=False,
                    context_chars=10**9)
uvicorn.run(provider.app(), host="127.0.0.1", port={port}, log_level="warning")
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until_up(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/v1/models", headers=HEADERS, timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not start")


@contextmanager
def servers(spill: str) -> Iterator[tuple[str, str, int]]:
    """The upstream and the proxy in front of it: their URLs and the proxy's pid."""
    up_port, proxy_port = free_port(), free_port()
    upstream_code = UPSTREAM.format(tests=str(REPO / "tests"), port=up_port)
    upstream = subprocess.Popen([sys.executable, "-c", upstream_code])
    env = {**os.environ, "CHATCLI_SPILL__ROOT": spill, "CHATCLI_PROXY__ACCESS_LOG": "false"}
    proxy = subprocess.Popen(
        [sys.executable, "-m", "middleware", "serve", "--port", str(proxy_port),
         "--anthropic-upstream", f"http://127.0.0.1:{up_port}"],
        env=env, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        up_url, proxy_url = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{proxy_port}"
        wait_until_up(up_url)
        wait_until_up(proxy_url)
        yield up_url, proxy_url, proxy.pid
    finally:
        for process in (proxy, upstream):
            process.terminate()
            process.wait(timeout=30)


def largest_requests(data: Path, count: int) -> list[dict[str, Any]]:
    transcripts = [t for f in sorted(data.glob("claude-code/*.jsonl")) for t in load_transcripts(f)]
    requests = [(t.name, r) for t in transcripts for r in t.requests()]
    requests.sort(key=lambda item: -len(json.dumps(item[1])))
    return [
        {"model": "bench", "max_tokens": 100, "messages": r, "_session": name}
        for name, r in requests[:count]
    ]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def latency(up: str, proxy: str, bodies: list[dict[str, Any]], rounds: int) -> None:
    print(f"latency on the {len(bodies)} largest real requests ({rounds} rounds, not streamed)")
    sizes = [len(json.dumps(b["messages"])) for b in bodies]
    print(f"  request sizes {min(sizes):,} - {max(sizes):,} characters")
    direct, through = [], []
    with httpx.Client(timeout=120) as client:
        for _ in range(rounds):
            for body in bodies:
                session = {"x-chatcli-session": body["_session"]}
                payload = {k: v for k, v in body.items() if k != "_session"}
                for url, times, extra in ((up, direct, {}), (proxy, through, session)):
                    start = time.perf_counter()
                    answer = client.post(url + "/v1/messages", json=payload,
                                         headers={**HEADERS, **extra})  # fmt: skip
                    times.append(time.perf_counter() - start)
                    if answer.status_code != 200:
                        raise RuntimeError(f"{url}: {answer.status_code} {answer.text[:200]}")
    added = [t - d for t, d in zip(through, direct, strict=True)]
    for name, values in (("direct", direct), ("through the proxy", through), ("added", added)):
        print(f"  {name:18} p50 {statistics.median(values) * 1e3:7.1f} ms   "
              f"p99 {percentile(values, 0.99) * 1e3:7.1f} ms")  # fmt: skip


async def conversation(client: httpx.AsyncClient, url: str, n: int, turns: int) -> int:
    """One agent: ``turns`` streamed requests, each repeating the history and adding a turn."""
    history: list[dict[str, Any]] = [{"role": "user", "content": f"conversation {n}"}]
    errors = 0
    for turn in range(turns):
        body = {"model": "bench", "max_tokens": 100, "stream": True, "messages": history}
        async with client.stream("POST", url + "/v1/messages", json=body, headers=HEADERS) as r:
            if r.status_code != 200:
                errors += 1
                print(f"  error {r.status_code}: {(await r.aread())[:200]!r}")
            async for _ in r.aiter_raw():
                pass
        history = [*history, {"role": "assistant", "content": "y" * 1000},
                   {"role": "user", "content": f"turn {turn} " + "z" * 2000}]  # fmt: skip
    return errors


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def throughput(url: str, pid: int | None, concurrent: int, turns: int) -> None:
    """``concurrent`` conversations at once; with ``pid``, the memory that process grew by."""
    limits = httpx.Limits(max_connections=concurrent, max_keepalive_connections=concurrent)
    idle = rss_kb(pid) if pid is not None else 0
    peak = idle
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:

        async def watch() -> None:
            nonlocal peak
            while pid is not None:
                peak = max(peak, rss_kb(pid))
                await asyncio.sleep(0.05)

        watcher = asyncio.create_task(watch())
        start = time.perf_counter()
        errors = await asyncio.gather(
            *(conversation(client, url, n, turns) for n in range(concurrent))
        )
        took = time.perf_counter() - start
        watcher.cancel()
    requests = concurrent * turns
    line = (
        f"  {concurrent:4} concurrent: {requests / took:7.1f} streamed requests/s, "
        f"{sum(errors)} errors"
    )
    if pid is not None:
        line += (f", proxy memory {idle / 1024:.0f} -> {peak / 1024:.0f} MB "
                 f"({(peak - idle) / concurrent:.0f} KB per conversation in flight)")  # fmt: skip
    print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--requests", type=int, default=20, help="largest requests timed")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=5, help="requests per conversation")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"skipped: no trajectories at {args.data}")
        return 0
    bodies = largest_requests(args.data, args.requests)
    with tempfile.TemporaryDirectory() as spill, servers(spill) as (up, proxy, pid):
        latency(up, proxy, bodies, args.rounds)
        print(f"throughput, {args.turns} streamed requests per conversation")
        for concurrent in (50, 200):
            for url, name, watched in ((up, "direct", None), (proxy, "through the proxy", pid)):
                print(f" {name}")
                asyncio.run(throughput(url, watched, concurrent, args.turns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
