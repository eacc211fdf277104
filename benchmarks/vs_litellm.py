"""``chatcli-mw serve`` beside the LiteLLM proxy, in one run: the latency each adds over
calling the upstream directly, on the same real request bodies sent to all three in a
random order, their throughput with many conversations at once, and their memory.

The upstream is the tests' provider stand-in (it enforces the provider's rules on every
history and answers 1,000 characters, streamed in 7-character events); it, ``chatcli-mw
serve`` and LiteLLM's proxy each run in a process of their own, one worker each, and the
client runs here. LiteLLM is never installed by this script: it runs the ``litellm``
executable of a separate virtualenv (``--litellm``), with no database, no logging
callbacks and no telemetry, forwarding Anthropic Messages to the stand-in through its
``/v1/messages`` endpoint (a ``model_list`` entry ``anthropic/<model>`` whose
``api_base`` is the stand-in) or, with ``--litellm-route passthrough``, its
``/anthropic`` pass-through.

Every request body is serialised once and the same bytes go to the stand-in, to
chatcli-mw and to LiteLLM back to back, in a random order; what a proxy adds is its time
minus the direct time of the same body in the same round (p50, p99). The ratio is
chatcli-mw's added time over LiteLLM's (below 1: chatcli-mw adds less); each proxy's CPU
time per request, read from ``/proc``, is beside it, since wall time on a shared machine
moves with the load. The parts:

(a) the four longest real Claude Code sessions, request after request, streamed;
(b) the largest requests, each already sent once (the proxies have seen them);
(c) the same, never seen: every message of every copy carries a tag of its own (a line after
    each text and tool result, a suffix on each tool-call id) in a session of its own, so
    no cache, in memory or on disk, can know any of it; and a copy whose first message
    only is new (a new conversation over messages seen in another);
(d) medium requests (110-130 KB), never seen;
(e) 50 and 200 conversations at once, each growing by a turn a request, one target at a
    time: throughput, p50 and p99;
(f) each proxy's resident memory (its process tree) at start, at its peak, after (e) and
    after some idle time.

``--records`` names where chatcli-mw records each billed answer (``ledger.url``):
``memory`` (null), ``sqlite`` (a file in the run's work folder) or ``postgresql`` (a
server this script starts in a temporary folder and stops at the end:
:mod:`benchmarks.postgres_server`). Several, comma-separated, start one ``chatcli-mw
serve`` each, and every body goes to each of them in the same random order as to the
others: their CPU per request side by side, the first the one the others are compared
with (with PostgreSQL, the server's own CPU per request is beside it). ``--baseline
TREE`` serves one more, from another source tree (an export of another commit), as it
records by default. ``--parts`` runs only some of (a) to (e).

    python benchmarks/vs_litellm.py [--litellm PATH] [--quick] [--json FILE]
        [--records memory,sqlite,postgresql] [--baseline TREE] [--parts sessions,seen]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import random
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
# The middleware beside this script is the one measured, also in an export of a commit.
sys.path.insert(0, str(REPO))

import middleware  # noqa: E402
from benchmarks.postgres_server import postgres  # noqa: E402
from benchmarks.processes import cpu_seconds, descendants, rss_kb  # noqa: E402
from middleware.replay.transcripts import Transcript, load_transcripts  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "trajectories"
#: A model LiteLLM knows (its cost lookup succeeds, as it does for a real deployment).
MODEL = "claude-sonnet-4-5-20250929"
#: Seconds an idle connection stays open, on the stand-in and on LiteLLM: what chatcli-mw
#: holds them (``middleware/proxy/listening.py``). At uvicorn's default of 5 s, a client
#: reusing a connection the server is closing at that moment gets a ReadError: 7 of 1,000
#: requests of the 200 conversations, on this busy machine, to either of them.
KEEP_ALIVE = 75
INSTALL_HINT = (
    "LiteLLM's proxy was not found. Install it into a virtualenv of its own (it pins its own "
    "versions of httpx, pydantic and others), for example\n"
    "    python -m venv /tmp/litellm-venv && /tmp/litellm-venv/bin/pip install "
    "'litellm[proxy]'\n"
    "and pass its executable: --litellm /tmp/litellm-venv/bin/litellm"
)

#: The stand-in, plus ``GET /bench/last``: the last body it accepted, to see what each
#: proxy forwards. Only that one body is kept (``record=False``).
UPSTREAM = """
import sys
sys.path.insert(0, {tests!r})
import uvicorn
from starlette.responses import JSONResponse
from starlette.routing import Route
from stand_in import Provider, Reply

last = {{}}

def script(fmt, body):
    last["body"] = body
    return Reply(text="y" * 1000)

async def seen(request):
    return JSONResponse(last.get("body"))

provider = Provider(script=script, record=False, context_chars=10**9)
app = provider.app()
app.router.routes.append(Route("/bench/last", seen))
uvicorn.run(app, host="127.0.0.1", port={port}, log_level="warning",
            timeout_keep_alive={keep_alive})
"""

LITELLM_CONFIG = """\
model_list:
  - model_name: {model}
    litellm_params:
      model: anthropic/{model}
      api_base: {upstream}
      api_key: sk-bench
litellm_settings:
  callbacks: []
  success_callback: []
  failure_callback: []
  turn_off_message_logging: true
  request_timeout: 300
general_settings:
  master_key: os.environ/LITELLM_MASTER_KEY
  disable_spend_logs: true
"""


# -- processes -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def find_litellm(option: str | None) -> str:
    """The LiteLLM executable: ``--litellm``, else ``litellm`` on PATH."""
    if option is not None:
        path = Path(option)
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise SystemExit(f"--litellm {option}: not an executable file.\n{INSTALL_HINT}")
    found = shutil.which("litellm")
    if found is None:
        raise SystemExit(INSTALL_HINT)
    return found


def litellm_version(litellm: str) -> str:
    """What ``litellm --version`` says (its answers carry it only on some routes)."""
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY_DISABLED": "true",
    }
    try:
        out = subprocess.run(
            [litellm, "--version"],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    words = [line.split("=")[-1].strip() for line in out.splitlines() if "Version" in line]
    return words[-1] if words else "?"


def wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path | None) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log is not None else ""
            raise RuntimeError(f"{url} exited with {process.returncode} while starting\n{tail}")
        try:
            # Anthropic's headers: without them chatcli-mw sends /v1/models to OpenAI.
            headers = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}
            if httpx.get(url, headers=headers, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not start within 180 s")


#: Where chatcli-mw records each billed answer (``--records``): ``ledger.url`` of each.
STORES = ("memory", "sqlite", "postgresql")
#: The name of the chatcli-mw served from ``--baseline``.
BASELINE = "baseline"


def chatcli(store: str) -> str:
    """The target name of the chatcli-mw recording to ``store`` (or the baseline)."""
    return f"chatcli-{store}"


def label(name: str) -> str:
    """How a target is named in the tables."""
    if name == "litellm":
        return "LiteLLM"
    if name.startswith("chatcli-"):
        return f"chatcli-mw ({name.removeprefix('chatcli-')})"
    return name


@dataclass
class Targets:
    """Where the same body goes: the messages URL of each, and the processes to watch."""

    direct: str
    #: Each proxy's messages URL: chatcli-mw's (one a store, :func:`chatcli`), LiteLLM's.
    proxies: dict[str, str]
    #: Each proxy's process, and PostgreSQL's (``database``) when one serves the records.
    pids: dict[str, int]
    upstream: str
    key: str

    def urls(self) -> dict[str, str]:
        return {"direct": self.direct, **self.proxies}

    @property
    def chatclis(self) -> list[str]:
        """chatcli-mw's targets, the one the others are compared with first."""
        return [name for name in self.proxies if name.startswith("chatcli-")]


def ledger_urls(stores: Sequence[str], work: Path, database: str | None) -> dict[str, str]:
    """``CHATCLI_LEDGER__URL`` for each store (``database``: PostgreSQL's URL)."""
    urls = {"memory": "null", "sqlite": f"sqlite:///{work / 'records.sqlite'}"}
    if database is not None:
        urls["postgresql"] = database
    return {store: urls[store] for store in stores}


@contextmanager
def servers(
    litellm: str,
    route: str,
    work: Path,
    *,
    console: bool = True,
    stores: Sequence[str] = ("sqlite",),
    baseline: Path | None = None,
) -> Iterator[Targets]:
    """The stand-in, a ``chatcli-mw serve`` for each records store (its console's records
    on or off; PostgreSQL started for it), one from ``baseline``, and LiteLLM's proxy in
    front of it."""
    with ExitStack() as stack:
        database = None
        if "postgresql" in stores:
            database = stack.enter_context(postgres())
        urls = ledger_urls(stores, work, None if database is None else database.url)
        chatclis: dict[str, tuple[Path, dict[str, str]]] = {
            chatcli(store): (REPO, {"CHATCLI_LEDGER__URL": url}) for store, url in urls.items()
        }
        if baseline is not None:
            chatclis[chatcli(BASELINE)] = (baseline, {"PYTHONPATH": str(baseline)})
        targets = stack.enter_context(_processes(litellm, route, work, console, chatclis))
        if database is not None:
            targets.pids["database"] = database.pid
        yield targets


@contextmanager
def _processes(
    litellm: str,
    route: str,
    work: Path,
    console: bool,
    chatclis: dict[str, tuple[Path, dict[str, str]]],
) -> Iterator[Targets]:
    """The stand-in, a ``chatcli-mw serve`` from each source tree with its own variables
    (``chatclis``, by name), and LiteLLM's proxy."""
    up_port, ll_port = free_port(), free_port()
    upstream_url = f"http://127.0.0.1:{up_port}"
    key = "sk-" + secrets.token_hex(32)
    upstream = subprocess.Popen(
        [
            sys.executable,
            "-c",
            UPSTREAM.format(tests=str(REPO / "tests"), port=up_port, keep_alive=KEEP_ALIVE),
        ]
    )
    started: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
    for name, (tree, variables) in chatclis.items():
        port = free_port()
        mw_env = {
            **os.environ,
            "CHATCLI_SPILL__ROOT": str(work / "spill" / name),
            "CHATCLI_PROXY__ACCESS_LOG": "false",
            "CHATCLI_PROXY__CONSOLE__ENABLED": "true" if console else "false",
            "XDG_STATE_HOME": str(work / "state" / name),  # the outbox, the default records
            **variables,
        }
        command = [sys.executable, "-m", "middleware", "serve", "--port", str(port),
                   "--anthropic-upstream", upstream_url]  # fmt: skip
        process = subprocess.Popen(command, env=mw_env, cwd=tree, stderr=subprocess.DEVNULL)
        started[name] = (process, port)
    config = work / "litellm.yaml"
    config.write_text(LITELLM_CONFIG.format(model=MODEL, upstream=upstream_url))
    ll_env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "LITELLM_"))}
    ll_env.update(
        LITELLM_MASTER_KEY=key,
        LITELLM_LOCAL_MODEL_COST_MAP="True",  # no fetch of the price list at start
        LITELLM_TELEMETRY_DISABLED="true",
        LITELLM_LOG="ERROR",  # uvicorn's access log off, as chatcli-mw's is
        ANTHROPIC_API_BASE=upstream_url,  # where the /anthropic pass-through goes
        ANTHROPIC_API_KEY="sk-bench",
    )
    ll_log = work / "litellm.log"
    with ll_log.open("wb") as log:
        proxy = subprocess.Popen(
            [litellm, "--config", str(config), "--host", "127.0.0.1", "--port", str(ll_port),
             "--num_workers", "1", "--keepalive_timeout", str(KEEP_ALIVE)],
            env=ll_env, cwd=work, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_until_up(upstream_url + "/v1/models", upstream, None)
        for process, port in started.values():
            wait_until_up(f"http://127.0.0.1:{port}/v1/models", process, None)
        wait_until_up(f"http://127.0.0.1:{ll_port}/health/liveliness", proxy, ll_log)
        path = "/anthropic/v1/messages" if route == "passthrough" else "/v1/messages"
        proxies = {name: f"http://127.0.0.1:{port}/v1/messages" for name, (_, port) in
                   started.items()}  # fmt: skip
        yield Targets(
            direct=upstream_url + "/v1/messages",
            proxies={**proxies, "litellm": f"http://127.0.0.1:{ll_port}{path}"},
            pids={**{name: p.pid for name, (p, _) in started.items()}, "litellm": proxy.pid},
            upstream=upstream_url,
            key=key,
        )
    finally:
        for process in (proxy, *(p for p, _ in started.values()), upstream):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# -- /proc -----------------------------------------------------------------------------------


class Memory(threading.Thread):
    """Samples each proxy's resident memory (its process tree) every 0.1 s: the peak."""

    def __init__(self, pids: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.trees = {name: descendants(pid) for name, pid in pids.items()}
        self.peak = {name: rss_kb(tree) for name, tree in self.trees.items()}
        self.stopped = threading.Event()

    def now(self) -> dict[str, int]:
        self.trees = {name: descendants(pid) for name, pid in self.pids.items()}
        return {name: rss_kb(tree) for name, tree in self.trees.items()}

    def cpu(self) -> dict[str, float]:
        return {name: cpu_seconds(tree) for name, tree in self.trees.items()}

    def run(self) -> None:
        tick = 0
        while not self.stopped.wait(0.1):
            tick += 1
            if tick % 20 == 0:
                self.trees = {name: descendants(pid) for name, pid in self.pids.items()}
            for name, tree in self.trees.items():
                self.peak[name] = max(self.peak[name], rss_kb(tree))


# -- request bodies --------------------------------------------------------------------------


@dataclass(frozen=True)
class Body:
    """One request: its history, the session it belongs to and a label."""

    messages: list[Any]
    session: str
    label: str

    def payload(self, stream: bool) -> bytes:
        body = {"model": MODEL, "max_tokens": 100, "stream": stream, "messages": self.messages}
        return json.dumps(body, ensure_ascii=False).encode()


def claude_code(data: Path) -> list[Transcript]:
    """The Claude Code sessions (top-level files; subagents live in folders)."""
    return [t for f in sorted(data.glob("claude-code/*.jsonl")) for t in load_transcripts(f)]


def all_requests(transcripts: list[Transcript]) -> list[Body]:
    return [
        Body(r, t.name, f"{t.name}@{i}") for t in transcripts for i, r in enumerate(t.requests())
    ]


def by_size(bodies: list[Body]) -> list[tuple[int, Body]]:
    """Each body with its size in bytes, largest first."""
    return sorted(((len(b.payload(False)), b) for b in bodies), key=lambda item: -item[0])


def _mark_text(text: str, tag: str) -> str:
    # Whitespace-only text stays as it is: a proxy may treat it apart (LiteLLM drops it).
    return f"{text}\n[{tag}]" if text.strip() else text


def _mark_block(block: Any, tag: str) -> Any:
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return {**block, "text": _mark_text(block["text"], tag)}
    if kind == "tool_use" and isinstance(block.get("id"), str):
        return {**block, "id": f"{block['id']}_{tag}"}
    if kind == "tool_result":
        marked = {**block, "tool_use_id": f"{block.get('tool_use_id')}_{tag}"}
        content = block.get("content")
        if isinstance(content, str):
            marked["content"] = _mark_text(content, tag)
        elif isinstance(content, list):
            marked["content"] = [_mark_block(item, tag) for item in content]
        return marked
    return block


def never_seen(messages: list[Any], tag: str) -> list[Any]:
    """``messages`` with ``tag`` in every one: a line after each text, tool result included,
    and a suffix on every tool-call id (pairs stay paired). Nothing a cache keys on, whole
    message, text or id, is what it was."""
    marked = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            content = _mark_text(content, tag)
        elif isinstance(content, list):
            content = [_mark_block(block, tag) for block in content]
        marked.append({**message, "content": content})
    return marked


def new_opening(messages: list[Any], tag: str) -> list[Any]:
    """``messages`` with ``tag`` in the first user message only: a new conversation whose
    later messages a cache may have seen in another."""
    if not messages:
        return messages
    return [never_seen(messages[:1], tag)[0], *messages[1:]]


# -- latency ---------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def exchange(client: httpx.Client, url: str, data: bytes, headers: dict[str, str]) -> float:
    """Seconds from sending ``data`` to the last byte of the answer."""
    start = time.perf_counter()
    with client.stream("POST", url, content=data, headers=headers) as answer:
        for _ in answer.iter_raw():
            pass
    took = time.perf_counter() - start
    if answer.status_code != 200:
        raise RuntimeError(f"{url}: {answer.status_code} {answer.read()[:300]!r}")
    return took


@dataclass
class Row:
    """One latency workload: the milliseconds each proxy added (by target name), and the
    CPU per request of each process watched (the proxies, PostgreSQL's ``database``)."""

    workload: str
    requests: int
    sizes_kb: tuple[float, float]
    direct_p50: float
    p50: dict[str, float]
    p99: dict[str, float]
    cpu_ms: dict[str, float]
    samples: dict[str, list[float]] = field(default_factory=dict)
    rss_after_kb: dict[str, int] = field(default_factory=dict)
    #: The load average (1 minute) as the workload ended.
    load: float = 0.0

    def ratio_p50(self, name: str) -> float:
        """What ``name`` adds at the median over what LiteLLM adds."""
        return ratio(self.p50[name], self.p50["litellm"])

    def ratio_p99(self, name: str) -> float:
        return ratio(self.p99[name], self.p99["litellm"])


class Bench:
    """The three targets, one client, a seeded order, and the rows measured so far."""

    def __init__(self, targets: Targets, memory: Memory, seed: int) -> None:
        self.targets = targets
        self.memory = memory
        self.rng = random.Random(seed)
        self.client = httpx.Client(timeout=300)
        self.rows: list[Row] = []

    def headers(self, session: str) -> dict[str, str]:
        return {
            "x-api-key": self.targets.key,
            "anthropic-version": "2023-06-01",
            "content-type": "application/json",
            "x-chatcli-session": session,
        }

    def once(self, body: Body, stream: bool, times: dict[str, list[float]] | None) -> None:
        """``body`` to the three targets in a random order."""
        data, headers = body.payload(stream), self.headers(body.session)
        urls = list(self.targets.urls().items())
        self.rng.shuffle(urls)
        for name, url in urls:
            took = exchange(self.client, url, data, headers)
            if times is not None:
                times[name].append(took)

    def measure(self, workload: str, bodies: Sequence[Body], stream: bool) -> Row:
        times: dict[str, list[float]] = {name: [] for name in self.targets.urls()}
        cpu = self.memory.cpu()
        for body in bodies:
            self.once(body, stream, times)
        used = {name: self.memory.cpu()[name] - cpu[name] for name in cpu}
        sizes = [len(b.payload(False)) / 1000 for b in bodies]
        row = summarise(workload, times, (min(sizes), max(sizes)), used)
        row.rss_after_kb = self.memory.now()
        row.load = os.getloadavg()[0]
        self.rows.append(row)
        added = ", ".join(
            f"{label(name)} +{row.p50[name]:.1f} ms ({row.cpu_ms[name]:.1f} ms CPU)"
            for name in self.targets.proxies
        )
        print(f"  {workload}: {added}", flush=True)
        return row

    def received(self, body: Body) -> dict[str, Any]:
        """What the stand-in got for ``body`` from each proxy, beside what was sent (a
        streamed request of it too, so the first timed one pays no first-use cost)."""
        report: dict[str, Any] = {}
        sent = json.loads(body.payload(False))
        for name, url in self.targets.urls().items():
            exchange(self.client, url, body.payload(True), self.headers(body.session))
            answer = self.client.post(url, content=body.payload(False),
                                      headers=self.headers(body.session))  # fmt: skip
            if answer.status_code != 200:
                raise RuntimeError(f"{url}: {answer.status_code} {answer.text[:300]}")
            got = self.client.get(self.targets.upstream + "/bench/last").json()
            pairs = zip(sent["messages"], got["messages"], strict=False)
            changed = sum(1 for a, b in pairs if a != b)
            report[name] = {
                "keys_added": sorted(set(got) - set(sent)),
                "keys_removed": sorted(set(sent) - set(got)),
                "keys_changed": sorted(
                    k for k in set(sent) & set(got) if k != "messages" and sent[k] != got[k]
                ),
                "messages_sent": len(sent["messages"]),
                "messages_received": len(got["messages"]),
                "messages_changed": changed,
                "kb_sent": round(len(body.payload(False)) / 1000, 1),
                "kb_received": round(len(json.dumps(got, ensure_ascii=False).encode()) / 1000, 1),
            }
        return report


def summarise(
    workload: str,
    times: dict[str, list[float]],
    sizes: tuple[float, float],
    cpu: dict[str, float],
) -> Row:
    direct = times["direct"]
    added = {
        name: [(t - d) * 1e3 for t, d in zip(values, direct, strict=True)]
        for name, values in times.items()
        if name != "direct"
    }
    return Row(
        workload=workload,
        requests=len(direct),
        sizes_kb=(round(sizes[0], 1), round(sizes[1], 1)),
        direct_p50=statistics.median(direct) * 1e3,
        p50={name: statistics.median(values) for name, values in added.items()},
        p99={name: percentile(values, 0.99) for name, values in added.items()},
        cpu_ms={name: used * 1e3 / max(len(direct), 1) for name, used in cpu.items()},
        samples={name: [round(v, 2) for v in values] for name, values in added.items()},
    )


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("inf")


# -- throughput ------------------------------------------------------------------------------


@dataclass
class Throughput:
    """One target under ``conversations`` at once: medians over the repeats."""

    target: str
    conversations: int
    requests: int
    per_second: float
    p50_ms: float
    p99_ms: float
    errors: int
    cpu_ms: float
    rss_mb_after: float
    #: Requests per second of each repeat.
    rates: list[float] = field(default_factory=list)
    #: PostgreSQL's CPU per request meanwhile (the records it was sent), when it runs.
    database_cpu_ms: float = 0.0
    #: The load average (1 minute) as the last repeat ended.
    load: float = 0.0


async def conversation(
    client: httpx.AsyncClient, url: str, key: str, name: str, *, turns: int, times: list[float]
) -> int:
    """One agent: ``turns`` streamed requests, each repeating the history and adding a turn."""
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01", "x-chatcli-session": name}
    history: list[dict[str, Any]] = [{"role": "user", "content": f"conversation {name}"}]
    errors = 0
    for turn in range(turns):
        body = {"model": MODEL, "max_tokens": 100, "stream": True, "messages": history}
        start = time.perf_counter()
        try:
            async with client.stream("POST", url, json=body, headers=headers) as answer:
                async for _ in answer.aiter_raw():
                    pass
                if answer.status_code != 200:
                    errors += 1
                    print(f"    {name}: {answer.status_code}")
        except httpx.HTTPError as exc:
            errors += 1
            print(f"    {name}: {type(exc).__name__} {exc}")
        times.append(time.perf_counter() - start)
        history = [*history, {"role": "assistant", "content": "y" * 1000},
                   {"role": "user", "content": f"turn {turn} " + "z" * 2000}]  # fmt: skip
    return errors


async def crowd(
    url: str, key: str, prefix: str, concurrent: int, turns: int
) -> tuple[float, list[float], int]:
    """``concurrent`` conversations at once: seconds taken, each request's time, errors."""
    limits = httpx.Limits(max_connections=concurrent, max_keepalive_connections=concurrent)
    times: list[float] = []
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        start = time.perf_counter()
        errors = await asyncio.gather(
            *(conversation(client, url, key, f"{prefix}-{n}", turns=turns, times=times)
              for n in range(concurrent))
        )  # fmt: skip
        took = time.perf_counter() - start
    return took, times, sum(errors)


def throughput(
    bench: Bench, concurrent: int, turns: int, run: str, repeats: int
) -> list[Throughput]:
    """Each target in turn, ``repeats`` times in a new random order each time (the load of
    a shared machine moves between them), then the medians."""
    runs: dict[str, list[Throughput]] = {}
    for repeat in range(repeats):
        order = list(bench.targets.urls().items())
        bench.rng.shuffle(order)
        for name, url in order:
            cpu = bench.memory.cpu()
            prefix = f"{run}-{name}-{concurrent}-{repeat}"
            took, times, errors = asyncio.run(
                crowd(url, bench.targets.key, prefix, concurrent, turns)
            )
            after = bench.memory.cpu()
            used = after.get(name, 0.0) - cpu.get(name, 0.0)
            database = after.get("database", 0.0) - cpu.get("database", 0.0)
            result = Throughput(
                target=name,
                conversations=concurrent,
                requests=len(times),
                per_second=len(times) / took,
                p50_ms=statistics.median(times) * 1e3,
                p99_ms=percentile(times, 0.99) * 1e3,
                errors=errors,
                cpu_ms=used * 1e3 / len(times) if name != "direct" else 0.0,
                rss_mb_after=bench.memory.now().get(name, 0) / 1024,
                database_cpu_ms=database * 1e3 / len(times),
                load=os.getloadavg()[0],
            )
            print(f"  {concurrent} conversations, {name}: {result.per_second:.1f} requests/s, "
                  f"p99 {result.p99_ms:.0f} ms, {errors} errors", flush=True)  # fmt: skip
            runs.setdefault(name, []).append(result)
    return [
        Throughput(
            target=name,
            conversations=concurrent,
            requests=sum(r.requests for r in done),
            per_second=statistics.median(r.per_second for r in done),
            p50_ms=statistics.median(r.p50_ms for r in done),
            p99_ms=statistics.median(r.p99_ms for r in done),
            errors=sum(r.errors for r in done),
            cpu_ms=statistics.median(r.cpu_ms for r in done),
            rss_mb_after=done[-1].rss_mb_after,
            rates=[round(r.per_second, 1) for r in done],
            database_cpu_ms=statistics.median(r.database_cpu_ms for r in done),
            load=done[-1].load,
        )
        for name, done in runs.items()
    ]


# -- the report ------------------------------------------------------------------------------


def latency_table(rows: list[Row], mw: str) -> str:
    """The latency of each workload through chatcli-mw's target ``mw`` and LiteLLM."""
    lines = [
        "| workload | n | KB | direct p50 | chatcli-mw adds p50 / p99 | LiteLLM adds p50 / p99 "
        "| ratio p50 / p99 | CPU per request chatcli-mw / LiteLLM (ratio) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.workload} | {r.requests} | {r.sizes_kb[0]:.0f}–{r.sizes_kb[1]:.0f} "
            f"| {r.direct_p50:.1f} ms | {r.p50[mw]:.1f} / {r.p99[mw]:.1f} ms "
            f"| {r.p50['litellm']:.1f} / {r.p99['litellm']:.1f} ms "
            f"| **{r.ratio_p50(mw):.2f}** / {r.ratio_p99(mw):.2f} "
            f"| {r.cpu_ms[mw]:.1f} / {r.cpu_ms['litellm']:.1f} ms "
            f"({ratio(r.cpu_ms[mw], r.cpu_ms['litellm']):.2f}) |"
        )
    return "\n".join(lines)


def stores_table(rows: list[Row], flows: list[Throughput], mws: list[str]) -> str:
    """chatcli-mw's targets side by side (its records stores), each workload's CPU per
    request against the first's; PostgreSQL's own CPU per request beside it."""
    first = mws[0]
    lines = [
        f"| workload | chatcli-mw records | adds p50 / p99 | ratio to LiteLLM p50 "
        f"| CPU per request | against {label(first)} | PostgreSQL's CPU per request | load |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        for mw in mws:
            database = r.cpu_ms.get("database")
            lines.append(
                f"| {r.workload} | {mw.removeprefix('chatcli-')} "
                f"| {r.p50[mw]:.1f} / {r.p99[mw]:.1f} ms | {r.ratio_p50(mw):.2f} "
                f"| {r.cpu_ms[mw]:.1f} ms | {_change(r.cpu_ms[mw], r.cpu_ms[first])} "
                f"| {_database(mw, database)} | {r.load:.1f} |"
            )
    for level in sorted({f.conversations for f in flows}):
        by = {f.target: f for f in flows if f.conversations == level}
        for mw in mws:
            f = by[mw]
            lines.append(
                f"| {level} conversations | {mw.removeprefix('chatcli-')} "
                f"| {f.p50_ms:.0f} / {f.p99_ms:.0f} ms (total) "
                f"| {ratio(f.p50_ms, by['litellm'].p50_ms):.2f} | {f.cpu_ms:.1f} ms "
                f"| {_change(f.cpu_ms, by[first].cpu_ms)} | {_database(mw, f.database_cpu_ms)} "
                f"| {f.load:.1f} |"
            )
    return "\n".join(lines)


def _change(value: float, reference: float) -> str:
    return f"{(value / reference - 1) * 100:+.0f}%" if reference > 0 else ""


def _database(mw: str, cpu_ms: float | None) -> str:
    return f"{cpu_ms:.1f} ms" if mw == chatcli("postgresql") and cpu_ms is not None else ""


def throughput_table(results: list[Throughput], names: list[str]) -> str:
    """Each target's throughput; a ratio line for each chatcli-mw against LiteLLM."""
    lines = [
        "| conversations | | requests/s (range) | p50 | p99 | errors | CPU per request "
        "| RSS after |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for level in sorted({r.conversations for r in results}):
        by = {r.target: r for r in results if r.conversations == level}
        for target in names:
            r = by[target]
            cpu = f"{r.cpu_ms:.1f} ms" if target != "direct" else ""
            rss = f"{r.rss_mb_after:.0f} MB" if target != "direct" else ""
            spread = f" ({min(r.rates):.1f}–{max(r.rates):.1f})" if len(r.rates) > 1 else ""
            lines.append(f"| {level} | {label(target)} | {r.per_second:.1f}{spread} "
                         f"| {r.p50_ms:.0f} ms "
                         f"| {r.p99_ms:.0f} ms | {r.errors} | {cpu} | {rss} |")  # fmt: skip
        ll = by["litellm"]
        for target in (name for name in names if name.startswith("chatcli-")):
            mw = by[target]
            lines.append(f"| {level} | ratio {label(target)} / LiteLLM | "
                         f"**{ratio(mw.per_second, ll.per_second):.2f}** | "
                         f"{ratio(mw.p50_ms, ll.p50_ms):.2f} "
                         f"| **{ratio(mw.p99_ms, ll.p99_ms):.2f}** "
                         f"| | {ratio(mw.cpu_ms, ll.cpu_ms):.2f} | |")  # fmt: skip
    return "\n".join(lines)


def memory_table(
    rss: dict[str, dict[str, int]], idle: float, idle_cpu: dict[str, float], names: list[str]
) -> str:
    lines = [
        f"| RSS (process tree) | start | peak | after the conversations | {idle:.0f} s later "
        "| CPU while idle |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        mb = {when: f"{rss[when][name] / 1024:.0f} MB" for when in rss}
        lines.append(
            f"| {label(name)} | {mb['start']} | {mb['peak']} | {mb['after_run']} | {mb['idle']} "
            f"| {idle_cpu[name] * 100:.1f}% |"
        )
    return "\n".join(lines)


def chatcli_version() -> str:
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "middleware"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return f"{middleware.__version__} (from {REPO})"
    return f"{middleware.__version__} ({commit}{', middleware/ modified' if dirty else ''})"


# -- main ------------------------------------------------------------------------------------


#: The parts of a run (``--parts``): (a) to (e) of the module's docstring.
PARTS = ("sessions", "seen", "unseen", "medium", "crowds")


def _choices(text: str, known: Sequence[str], what: str) -> list[str]:
    chosen = [word.strip() for word in text.split(",") if word.strip()]
    unknown = [word for word in chosen if word not in known]
    if unknown or not chosen or len(set(chosen)) < len(chosen):
        raise argparse.ArgumentTypeError(
            f"{what} are some of {', '.join(known)}, comma-separated, each once: not {text!r}"
        )
    return chosen


def _stores(text: str) -> list[str]:
    return _choices(text, STORES, "stores")


def _parts(text: str) -> list[str]:
    return _choices(text, PARTS, "parts")


def options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--data", type=Path, default=DEFAULT_DATA, help="the recorded sessions' folder")
    add("--litellm", help="LiteLLM's executable (default: litellm on PATH)")
    add("--litellm-route", choices=("messages", "passthrough"), default="messages",
        help="LiteLLM's /v1/messages (default) or its /anthropic pass-through")  # fmt: skip
    add("--quick", action="store_true",
        help="25 requests a session, 10 bodies, 1 round, 3 turns, 1 repeat, 5 s idle")  # fmt: skip
    add("--sessions", type=int, default=4, help="real sessions replayed")
    add("--session-requests", type=int, default=0,
        help="replay the first N requests of each session (0: all)")  # fmt: skip
    add("--requests", type=int, default=20, help="largest requests timed")
    add("--medium", type=int, default=0, help="medium requests timed (0: all)")
    add("--rounds", type=int, default=3, help="rounds over the largest and medium")
    add("--turns", type=int, default=5, help="requests per concurrent conversation")
    add("--repeats", type=int, default=3, help="runs of each target at each concurrency")
    add("--concurrency", default="50,200", help="conversations at once, comma-separated")
    add("--idle", type=float, default=30, help="seconds idle before the last RSS reading")
    add("--seed", type=int, default=0, help="of the order the targets are called in")
    add("--console", choices=("on", "off"), default="on",
        help="chatcli-mw's console records (proxy.console.enabled; default: on)")  # fmt: skip
    add("--records", type=_stores, default=["sqlite"],
        help="where chatcli-mw records (ledger.url), comma-separated, one chatcli-mw each, "
             "the first the reference: memory, sqlite, postgresql (default: sqlite)")  # fmt: skip
    add("--baseline", type=Path,
        help="also serve a chatcli-mw from this source tree (another commit's export)")  # fmt: skip
    add("--parts", type=_parts, default=list(PARTS),
        help=f"which parts to run, comma-separated: {', '.join(PARTS)} (default: all)")  # fmt: skip
    add("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.quick:  # smaller defaults; options given still win
        parser.set_defaults(session_requests=25, requests=10, medium=10, rounds=1, turns=3,
                            repeats=1, idle=5.0)  # fmt: skip
        args = parser.parse_args(argv)
    return args


@dataclass(frozen=True)
class Workload:
    """The real bodies each part of the run sends."""

    sessions: list[list[Body]]
    largest: list[Body]
    medium: list[Body]

    @classmethod
    def read(cls, args: argparse.Namespace) -> Workload:
        transcripts = sorted(claude_code(args.data), key=lambda t: -t.request_count)
        sessions = [
            all_requests([t])[: args.session_requests or None] for t in transcripts[: args.sessions]
        ]
        sized = by_size(all_requests(transcripts))
        medium = [b for n, b in reversed(sized) if 110_000 <= n <= 130_000]
        if args.medium:
            step = max(len(medium) / args.medium, 1)
            medium = [medium[int(i * step)] for i in range(min(args.medium, len(medium)))]
        return cls(sessions, [b for _, b in sized[: args.requests]], medium)


Mark = Callable[[list[Any], str], list[Any]]


def fresh(bodies: list[Body], rounds: int, kind: str, mark: Mark, run: str) -> list[Body]:
    """``rounds`` copies of ``bodies``, each unique (``mark``) and in a session of its own."""
    out = []
    for r in range(rounds):
        for i, b in enumerate(bodies):
            tag = f"bench{run}{kind}{r}n{i}"
            out.append(Body(mark(b.messages, tag), tag, b.label))
    return out


def latencies(bench: Bench, work: Workload, rounds: int, run: str, parts: list[str]) -> None:
    """Parts (a) to (d) (those of ``parts``): every body to every target, in a random
    order."""
    if "sessions" in parts:
        print("(a) real sessions replayed in order, streamed", flush=True)
        replay = [Body(b.messages, f"{run}-{b.session}", b.label) for s in work.sessions for b in s]
        bench.measure(f"{len(work.sessions)} real Claude Code sessions in order, streamed",
                      replay, stream=True)  # fmt: skip
    n = len(work.largest)
    if "seen" in parts:
        print("(b) largest bodies, already seen", flush=True)
        seen = [Body(b.messages, f"{run}-seen-{i}", b.label) for i, b in enumerate(work.largest)]
        for body in seen:  # warm-up: each target gets each body once
            bench.once(body, False, None)
        bench.measure(f"{n} largest, seen, not streamed", seen * rounds, False)
        bench.measure(f"{n} largest, seen, streamed", seen * rounds, True)
    if "unseen" in parts:
        unseen(bench, work, rounds, run)
    if "medium" in parts:
        print("(d) medium bodies (110-130 KB), never seen", flush=True)
        m = len(work.medium)
        bench.measure(f"{m} medium, never seen, not streamed",
                      fresh(work.medium, rounds, "m", never_seen, run), False)  # fmt: skip
        bench.measure(f"{m} medium, never seen, streamed",
                      fresh(work.medium, rounds, "ms", never_seen, run), True)  # fmt: skip


def unseen(bench: Bench, work: Workload, rounds: int, run: str) -> None:
    """Part (c): the largest bodies, never seen."""
    n = len(work.largest)
    print("(c) largest bodies, never seen", flush=True)
    bench.measure(f"{n} largest, never seen, not streamed",
                  fresh(work.largest, rounds, "u", never_seen, run), False)  # fmt: skip
    bench.measure(f"{n} largest, never seen, streamed",
                  fresh(work.largest, rounds, "s", never_seen, run), True)  # fmt: skip
    bench.measure(f"{n} largest, new session, only the first message new, not streamed",
                  fresh(work.largest, rounds, "o", new_opening, run), False)  # fmt: skip


def report(
    rows: list[Row],
    flows: list[Throughput],
    t: Targets,
    memory: tuple[dict[str, dict[str, int]], float, dict[str, float]],
) -> None:
    """The tables: latency, throughput, the stores side by side (with several), memory."""
    mws = t.chatclis
    print()
    print(latency_table(rows, mws[0]))
    if flows:
        print()
        print(throughput_table(flows, list(t.urls())))
    if len(mws) > 1:
        print()
        print(stores_table(rows, flows, mws))
    print()
    print(memory_table(*memory, list(t.proxies)))
    print()


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    litellm = find_litellm(args.litellm)
    if not args.data.is_dir():
        print(f"skipped: no trajectories at {args.data}")
        return 0
    work = Workload.read(args)
    run = secrets.token_hex(3)
    ll_version = litellm_version(litellm)
    load_before = os.getloadavg()
    started = time.monotonic()
    print(f"chatcli-mw {chatcli_version()} beside LiteLLM {ll_version} ({litellm}, route "
          f"{args.litellm_route}); {os.cpu_count()} CPUs, load {load_before[0]:.2f}",
          flush=True)  # fmt: skip

    with (
        tempfile.TemporaryDirectory() as tmp,
        servers(litellm, args.litellm_route, Path(tmp), console=args.console == "on",
                stores=args.records, baseline=args.baseline) as t,
    ):  # fmt: skip
        memory = Memory(t.pids)
        rss_start = memory.now()
        memory.peak = dict(rss_start)
        memory.start()
        bench = Bench(t, memory, args.seed)
        # A copy no workload sends, so that none is warmer for it.
        check = work.largest[0]
        tag = f"bench{run}check"
        received = bench.received(Body(never_seen(check.messages, tag), tag, check.label))
        for name in t.proxies:
            got = received[name]
            print(f"the stand-in got from {label(name)}: {got['kb_received']} of "
                  f"{got['kb_sent']} KB, {got['messages_changed']} of {got['messages_sent']} "
                  f"messages changed, top-level keys added {got['keys_added']}, removed "
                  f"{got['keys_removed']}, changed {got['keys_changed']}", flush=True)  # fmt: skip
        latencies(bench, work, args.rounds, run, args.parts)
        bench.client.close()

        flows: list[Throughput] = []
        if "crowds" in args.parts:
            print(f"(e) concurrent conversations, {args.turns} streamed requests each",
                  flush=True)  # fmt: skip
            for level in (int(c) for c in args.concurrency.split(",")):
                flows += throughput(bench, level, args.turns, run, args.repeats)
        after_run = memory.now()

        print(f"(f) idle {args.idle:.0f} s", flush=True)
        cpu = memory.cpu()
        time.sleep(args.idle)
        idle_cpu = {name: (memory.cpu()[name] - cpu[name]) / args.idle for name in cpu}
        memory.stopped.set()
        memory.join()
        rss = {"start": rss_start, "peak": memory.peak, "after_run": after_run,
               "idle": memory.now()}  # fmt: skip

    took = time.monotonic() - started
    load_after = os.getloadavg()
    versions = {
        "chatcli-mw": chatcli_version(),
        "litellm": ll_version,
        "litellm_executable": litellm,
        "litellm_route": args.litellm_route,
        "console": args.console,
        "records": args.records,
        "baseline": None if args.baseline is None else str(args.baseline),
    }
    machine = {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "load_before": load_before,
        "load_after": load_after,
    }
    report(bench.rows, flows, t, (rss, args.idle, idle_cpu))
    print(f"LiteLLM {versions['litellm']} ({args.litellm_route}), chatcli-mw "
          f"{versions['chatcli-mw']} (console {args.console}, records "
          f"{','.join(args.records)}), Python {machine['python']}, "
          f"{machine['nproc']} CPUs, "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, "
          f"{took / 60:.1f} min")  # fmt: skip
    if args.json is not None:
        figures = {
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "command": " ".join(["benchmarks/vs_litellm.py", *(argv or sys.argv[1:])]),
            "machine": machine,
            "versions": versions,
            "options": {k: str(v) for k, v in vars(args).items()},
            "received": received,
            "latency": [asdict(r) for r in bench.rows],
            "throughput": [asdict(f) for f in flows],
            "rss_kb": rss,
            "idle_cpu_share": idle_cpu,
            "minutes": round(took / 60, 2),
        }
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
