"""A soak of ``chatcli-mw serve`` as a long-lived service: agents in growing conversations at
once, some slow to send and slow to read, while the object store they spill to hangs for a
while mid-run. Every request must be answered (a 200) within its deadline, and the proxy's
memory must stay flat once the conversations have grown.

The store is moto's S3 server behind a :class:`Relay` that can be frozen: while frozen it
accepts connections and forwards nothing, as a store behind a dead load balancer does. The
upstream is the provider stand-in; the proxy is ``chatcli-mw serve`` in a process of its
own, its resident memory read from ``/proc``. ``benchmarks/soak.py`` runs it at full size
(200 conversations, 4 minutes, the store hanging a minute); ``tests/proxy/test_soak.py`` a
short one.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from proxy_stack import serve_process_pid
from servers import free_port

TESTS = Path(__file__).resolve().parent

HEADERS = {"x-api-key": "sk-soak", "anthropic-version": "2023-06-01"}
UPSTREAM = """
import sys
sys.path.insert(0, {tests!r})
import uvicorn
from stand_in import Provider, Reply
provider = Provider(script=lambda fmt, body: Reply(text="done " * 40), record=False,
                    context_chars=10**9)
uvicorn.run(provider.app(), host="127.0.0.1", port={port}, log_level="warning")
"""
#: What a request may take at most: the store's deadline (spill.timeout_seconds, 10 s)
#: twice over (a spill and a reading), the slow client's own pace, and some room.
DEADLINE_SECONDS = 45.0


class Relay:
    """A TCP relay to ``target`` that :meth:`freeze` makes silent: connections are
    accepted and bytes are taken, but nothing goes through until :meth:`thaw`."""

    def __init__(self, target: str) -> None:
        host, port = target.removeprefix("http://").split(":")
        self.target = (host, int(port))
        self.frozen = threading.Event()
        self.thawed = threading.Condition()
        self.closed = threading.Event()
        self.open: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1024)
        self.listener.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def freeze(self) -> None:
        self.frozen.set()

    def thaw(self) -> None:
        self.frozen.clear()
        with self.thawed:
            self.thawed.notify_all()

    def close(self) -> None:
        """Stop relaying and close every connection."""
        self.closed.set()
        self.thaw()
        self.acceptor.join(timeout=5)
        self.listener.close()
        with self.lock:
            held, self.open = list(self.open), set()
        for sock in held:
            sock.close()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        self._hold(client)
        self._wait_thawed()
        try:
            upstream = socket.create_connection(self.target)
        except OSError:
            self._close(client)
            return
        self._hold(upstream)
        back = threading.Thread(target=self._pump, args=(upstream, client), daemon=True)
        back.start()
        self._pump(client, upstream)
        back.join()
        self._close(client, upstream)

    def _hold(self, sock: socket.socket) -> None:
        with self.lock:
            self.open.add(sock)

    def _close(self, *socks: socket.socket) -> None:
        for sock in socks:
            with self.lock:
                self.open.discard(sock)
            sock.close()

    def _wait_thawed(self) -> None:
        with self.thawed:
            while self.frozen.is_set() and not self.closed.is_set():
                self.thawed.wait(1)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self._wait_thawed()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    late: list[float] = field(default_factory=list)
    during_hang: list[float] = field(default_factory=list)


#: Lines of a tool's output on an ordinary turn, one drawn at random (lines of about 45
#: characters: 135 B to 18 KB, median 0.8 KB). Real agents' outputs are smaller still: in
#: the recorded Claude Code sessions the median is 250 characters, 90% are under 3.3 KB
#: and 99% under 22 KB (the CLI cuts a command's output at 30,000 characters).
ORDINARY_LINES = (3, 5, 8, 10, 15, 20, 40, 70, 150, 400)
#: Lines of the large output of every ``large_every``-th turn (about 110 KB: a build log,
#: a whole file), over any cap: spilled, so the store is used.
LARGE_LINES = 2_500


def tool_output(rng: random.Random, turn: int, large_every: int = 10) -> str:
    """A tool's output: an ordinary one, or on every ``large_every``-th turn a large one."""
    lines = LARGE_LINES if turn % large_every == 0 else rng.choice(ORDINARY_LINES)
    return "".join(f"{turn:04d} line {i}: {'x' * rng.randint(10, 60)}\n" for i in range(lines))


async def slowly(data: bytes, rng: random.Random) -> AsyncIterator[bytes]:
    """``data`` in 16 KB pieces, a pause between them: a client on a slow link."""
    for start in range(0, len(data), 16_384):
        yield data[start : start + 16_384]
        await asyncio.sleep(rng.uniform(0.01, 0.05))


async def agent(
    number: int,
    url: str,
    *,
    until: float,
    slow: bool,
    hang: tuple[float, float],
    tally: Tally,
    deadline: float = DEADLINE_SECONDS,
    max_messages: int = 120,
    think: tuple[float, float] = (2.0, 8.0),
    large_every: int = 10,
    under_way: bool = False,
    join_within: float = 0.0,
) -> None:
    """One agent's conversation until ``until``. ``under_way``: it holds some turns
    already (half to a full history, at random) when its first request comes, as after a
    proxy's restart; it sends that request within ``join_within`` seconds of the start."""
    rng = random.Random(number)
    client = httpx.AsyncClient(timeout=deadline * 2)
    history: list[dict[str, Any]] = [{"role": "user", "content": f"task {number}: fix it"}]
    session = {"x-chatcli-session": f"soak-{number}"}
    # An agent's history grows from half full to full, then is compacted to half: at
    # any moment it is anywhere between, at random.
    turn = rng.randrange(max_messages // 8, max_messages // 4) if under_way else 0
    for earlier in range(1, turn + 1):
        history += [*_tool_turn(rng, number, earlier, large_every), *_ANSWERED]
    await asyncio.sleep(rng.uniform(0, join_within))
    async with client:
        while time.monotonic() < until:
            turn += 1
            history = [*history, *_tool_turn(rng, number, turn, large_every)]
            body = {"model": "soak", "max_tokens": 100, "stream": True, "messages": history}
            data = httpx.Request("POST", url, json=body).content
            started = time.monotonic()
            try:
                content = slowly(data, rng) if slow else data
                headers = {**HEADERS, **session, "content-type": "application/json"}
                async with client.stream(
                    "POST", url + "/v1/messages", content=content, headers=headers
                ) as answer:
                    said = b""
                    async for chunk in answer.aiter_bytes():
                        said = (said + chunk)[:300]  # what an error answer says
                        if slow:
                            await asyncio.sleep(0.02)
                    status = answer.status_code
            except httpx.HTTPError as exc:
                tally.failures.append(f"conversation {number} turn {turn}: {exc!r}")
                continue
            took = time.monotonic() - started
            tally.latencies.append(took)
            if hang[0] <= started <= hang[1]:
                tally.during_hang.append(took)
            if status != 200:
                text = said.decode(errors="replace")
                tally.failures.append(f"conversation {number} turn {turn}: HTTP {status} {text}")
            if took > deadline:
                tally.late.append(took)
            history += _ANSWERED
            if len(history) > max_messages:  # the agent compacts its history, as agents do
                history = history[:1] + history[-(max_messages // 2) :]
            await asyncio.sleep(rng.uniform(*think))  # the model and the tool take time


#: The model's answer to a tool's result, and the user's next word.
_ANSWERED = ({"role": "assistant", "content": "ok"}, {"role": "user", "content": "go on"})


def _tool_turn(
    rng: random.Random, number: int, turn: int, large_every: int
) -> list[dict[str, Any]]:
    """The model's tool call of ``turn`` and the tool's result."""
    call = {
        "type": "tool_use",
        "id": f"t{number}_{turn}",
        "name": "Bash",
        "input": {"command": f"step {turn}"},
    }
    result = {
        "type": "tool_result",
        "tool_use_id": call["id"],
        "content": tool_output(rng, turn, large_every),
    }
    return [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextmanager
def stack(
    store: str, options: dict[str, Any], overrides: dict[str, Any]
) -> Iterator[tuple[str, int]]:
    """The stand-in in a process of its own and ``chatcli-mw serve`` in front of it,
    spilling to ``store``; yields the proxy's URL and process id."""
    up_port = free_port()
    code = UPSTREAM.format(tests=str(TESTS), port=up_port)
    upstream = subprocess.Popen([sys.executable, "-c", code])
    settings = {"spill.url": store, "spill.storage_options": json.dumps(options), **overrides}
    try:
        with serve_process_pid(f"http://127.0.0.1:{up_port}", settings) as served:
            yield served
    finally:
        upstream.terminate()
        upstream.wait(timeout=60)


@dataclass(frozen=True)
class Plan:
    conversations: int
    seconds: float
    hang_at: float  # seconds into the run
    hang_for: float
    slow: float  # share of slow clients
    #: RSS is judged from this many seconds on (the conversations have grown by then).
    settled_after: float = 60.0
    #: The proxy's policy, as CHATCLI_* overrides of dotted keys.
    overrides: tuple[tuple[str, Any], ...] = ()
    #: What a request may take at most.
    deadline: float = DEADLINE_SECONDS
    #: Messages an agent's history grows to before it compacts it to half.
    max_messages: int = 120
    #: Seconds between an answer and the agent's next request (the model's answer and
    #: the tool's run; a real model takes seconds to answer, the stand-in none).
    think: tuple[float, float] = (2.0, 8.0)
    #: Every this many turns, a tool's output is large (spilled); the others are
    #: ordinary (:func:`tool_output`). With 120 messages, a history holds about 0.8 MB at
    #: 10 (twice the largest real Claude Code request), 3.3 MB at 2.
    large_every: int = 10
    #: Conversations are under way when the run starts (each holds half to a full
    #: history, at random, as at any moment of a long run), as after a proxy's restart:
    #: memory is near its steady state from the first minute, instead of growing with
    #: the histories for minutes.
    under_way: bool = True
    #: Seconds within which the agents send their first request (at random).
    join_within: float = 30.0


@dataclass
class Outcome:
    tally: Tally
    rss: list[tuple[float, float]]  # (seconds into the run, MB)
    settled: float  # RSS when the run settled, MB
    peak: float  # the highest after that, MB
    #: Requests forwarded as they came, the proxy too busy to start cleaning them in time
    #: (answered, but not cleaned).
    uncleaned: int = 0

    @property
    def flat(self) -> bool:
        """RSS after settling stays within a quarter (and 20 MB) of what it was then."""
        return self.peak <= self.settled * 1.25 + 20

    @property
    def passed(self) -> bool:
        return not self.tally.failures and not self.tally.late and self.flat and not self.uncleaned


async def _run(plan: Plan, url: str, pid: int, relay: Relay, echo: Any) -> Outcome:
    start = time.monotonic()
    until = start + plan.seconds
    hang = (start + plan.hang_at, start + plan.hang_at + plan.hang_for)
    tally = Tally()
    rng = random.Random(0)
    slow = [rng.random() < plan.slow for _ in range(plan.conversations)]
    agents = [
        asyncio.create_task(
            agent(
                n,
                url,
                until=until,
                slow=slow[n],
                hang=hang,
                tally=tally,
                deadline=plan.deadline,
                max_messages=plan.max_messages,
                think=plan.think,
                large_every=plan.large_every,
                under_way=plan.under_way,
                join_within=plan.join_within,
            )
        )
        for n in range(plan.conversations)
    ]
    samples: list[tuple[float, float]] = []
    frozen = False
    while any(not task.done() for task in agents):
        now = time.monotonic()
        if not frozen and hang[0] <= now < hang[1]:
            relay.freeze()
            frozen = True
            echo(f"  {now - start:5.0f} s  the store hangs")
        elif frozen and now >= hang[1]:
            relay.thaw()
            frozen = False
            echo(f"  {now - start:5.0f} s  the store answers again")
        samples.append((now - start, rss_mb(pid)))
        held = await _held_mb(url)
        echo(
            f"  {now - start:5.0f} s  RSS {samples[-1][1]:6.0f} MB ({held}), "
            f"{len(tally.latencies)} answered"
        )
        await asyncio.sleep(min(5.0, plan.seconds / 20))
    relay.thaw()
    await asyncio.gather(*agents)
    settled = [rss for at, rss in samples if at >= plan.settled_after] or [samples[-1][1]]
    uncleaned = int((await _metrics(url)).get(BUSY, 0))
    outcome = Outcome(tally, samples, settled[0], max(settled), uncleaned)
    echo(
        f"\nrequests answered: {len(tally.latencies)}; failures: {len(tally.failures)}; "
        f"over {plan.deadline:g} s: {len(tally.late)}; forwarded uncleaned (busy): "
        f"{uncleaned}"
    )
    for failure in tally.failures[:10]:
        echo("  " + failure)
    ordered = sorted(tally.latencies) or [0.0]
    echo(
        f"latency p50 {statistics.median(ordered):.2f} s, "
        f"p99 {ordered[int(0.99 * (len(ordered) - 1))]:.2f} s, max {ordered[-1]:.2f} s"
    )
    if tally.during_hang:
        echo(
            f"started while the store hung: {len(tally.during_hang)}, "
            f"max {max(tally.during_hang):.2f} s"
        )
    echo(
        f"RSS at {plan.settled_after:g} s {outcome.settled:.0f} MB, peak after "
        f"{outcome.peak:.0f} MB, at the end {samples[-1][1]:.0f} MB"
    )
    return outcome


#: Requests forwarded uncleaned: the proxy could not start cleaning them in time.
BUSY = 'chatcli_proxy_passthrough_total{reason="busy"}'


async def _held_mb(url: str) -> str:
    """What the proxy's metrics say its session state and its cache hold, and how many
    requests continued their conversation or went through uncleaned, the proxy too busy."""
    try:
        found = await _metrics(url)
    except httpx.HTTPError as exc:
        return f"metrics: {exc!r}"
    mib = 2**20
    return (
        f"state {found.get('chatcli_proxy_session_state_bytes', 0) / mib:.0f} MB, "
        f"cache {found.get('chatcli_proxy_cache_bytes', 0) / mib:.0f} MB, "
        f"continued {found.get('chatcli_proxy_continued_total', 0):.0f}, "
        f"busy {found.get(BUSY, 0):.0f}"
    )


def soak(plan: Plan, echo: Any = lambda line: None) -> Outcome:
    """Run ``plan`` against moto, the stand-in and a ``chatcli-mw serve`` process."""
    from object_store import s3_server

    with s3_server() as s3:
        bucket = s3.bucket(versioned=False)
        relay = Relay(s3.endpoint)
        options = {"client_kwargs": {"endpoint_url": relay.url}}
        try:
            with stack(f"s3://{bucket}/spill", options, dict(plan.overrides)) as (url, pid):
                echo(
                    f"{plan.conversations} conversations for {plan.seconds:g} s, the store "
                    f"hanging from {plan.hang_at:g} s for {plan.hang_for:g} s"
                )
                return asyncio.run(_run(plan, url, pid, relay, echo))
        finally:
            relay.close()


async def _metrics(url: str) -> dict[str, float]:
    """The proxy's metrics the soak follows, by name (with labels)."""
    async with httpx.AsyncClient(timeout=5) as client:
        text = (await client.get(url + "/metrics")).text
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in (
            "chatcli_proxy_session_state_bytes",
            "chatcli_proxy_cache_bytes",
            "chatcli_proxy_continued_total",
            BUSY,
        ):
            found[name] = float(value)
    return found
