"""chatcli-mw serve under a low open-file limit (issue 36, item 10): the files it keeps for
itself scale with the limit, so a limit of 256 leaves it room for many clients, not one;
``/healthz`` answers while the client connections are all taken; past the room the limit
leaves, it stops accepting (the connections wait in the listen backlog) instead of
failing ``accept()`` in a loop; and the errors that do repeat are logged once per interval.

Each proxy runs as ``chatcli-mw serve`` in a process of its own, started by ``prlimit``
with the limit under test, in front of the provider stand-in."""

from __future__ import annotations

import json
import logging
import os
import resource
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
from proxy_stack import CHAT_BODY, bodies_in_progress, half_open
from servers import free_port
from stand_in import Provider
from waiting import wait_for

from middleware.formats.routes import providers
from middleware.logs import LOG_INTERVAL_SECONDS, IntervalLog
from middleware.proxy.open_files import STATUS_CONNECTIONS, open_files

HEADERS = {"authorization": "Bearer sk-test"}
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

pytestmark = [
    pytest.mark.skipif(
        shutil.which("prlimit") is None or not Path("/proc/self/fd").is_dir(),
        reason="needs prlimit (util-linux) and /proc to set and read a process's open files",
    ),
    # It times a real wait: in the suite's "timing" group (pyproject.toml's addopts).
    pytest.mark.xdist_group("timing"),
]


@contextmanager
def serve_with_open_files(
    upstream: str, files: int, overrides: Mapping[str, Any], log: Path
) -> Iterator[tuple[str, int]]:
    """``chatcli-mw serve`` with an open-file limit of ``files`` (soft and hard) in front of
    ``upstream``, its stderr in ``log``; yields its URL and process id once it answers
    anything (the test says what it must answer)."""
    port = free_port()
    env = {
        **os.environ,
        **{
            "CHATCLI_" + key.upper().replace(".", "__"): (
                value if isinstance(value, str) else json.dumps(value)
            )
            for key, value in overrides.items()
        },
    }
    script = Path(sys.executable).parent / "chatcli-mw"
    command = ["prlimit", f"--nofile={files}:{files}", "--", str(script), "serve", "--port",
               str(port)]  # fmt: skip
    for provider in providers():
        command += ["--upstream", f"{provider.name}={upstream}"]
    url = f"http://127.0.0.1:{port}"
    with log.open("w", encoding="utf-8") as written:
        process = subprocess.Popen(command, env=env, stderr=written)  # prlimit execs serve
        try:
            assert wait_for(lambda: _answers(url) or process.poll() is not None, 60)
            assert process.poll() is None, log.read_text(encoding="utf-8")
            yield url, process.pid
        finally:
            process.terminate()
            process.wait(timeout=60)


def _answers(url: str) -> bool:
    try:
        httpx.get(url + "/healthz", timeout=2)
    except httpx.TransportError:
        return False
    return True


def connect_silent(url: str, count: int) -> list[socket.socket]:
    """``count`` connections that send nothing (connect() completes in the kernel's
    backlog whether or not the proxy accepts them)."""
    host, port = url.removeprefix("http://").split(":")
    held = []
    try:
        for _ in range(count):
            held.append(socket.create_connection((host, int(port)), timeout=30))
    except BaseException:
        for sock in held:
            sock.close()
        raise
    return held


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@contextmanager
def peak_open_files(pid: int) -> Iterator[list[int]]:
    """The most files ``pid`` held at once while the block ran (sampled all along)."""
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            with suppress(OSError):  # the process ended
                peak[0] = max(peak[0], open_fds(pid))
            done.wait(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()


def request(url: str, timeout: float = 30) -> int:
    return httpx.post(
        url + "/v1/chat/completions", json=BODY, headers=HEADERS, timeout=timeout
    ).status_code


def healthz(url: str, timeout: float = 30) -> int:
    return httpx.get(url + "/healthz", timeout=timeout).status_code


@pytest.fixture(autouse=True)
def room_for_the_clients() -> Iterator[None]:
    """The test process holds ~1,100 sockets itself: its own soft limit is raised for them
    while the test runs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 4096 if hard == resource.RLIM_INFINITY else min(hard, 4096)
    if wanted < 1400:
        pytest.skip(f"the test process may open {hard} files at most; it needs 1,400")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_files_kept_scale_with_the_limit() -> None:
    """The proxy keeps files for itself (its store, logs, the upstream connections), a
    share of the limit: a limit of 256 leaves room for a hundred clients, not one."""
    small = open_files(wanted=1000, upstream=100, limit=256)
    assert small.served >= 100 and small.accepted > small.served
    assert small.kept >= 100 + 16  # the upstream connections, and more
    usual = open_files(wanted=1000, upstream=100, limit=1024)
    assert usual.served >= 700 and usual.accepted + usual.kept == 1024
    large = open_files(wanted=1000, upstream=100, limit=1_048_576)
    assert large.served == 1000 and large.kept <= 100 + 256
    assert large.accepted == 2 * 1000 + STATUS_CONNECTIONS  # memory bounded by the cap
    for limit in (64, 128, 256, 512, 1024, 2048, 4096, 65536):
        files = open_files(wanted=1_000_000, upstream=10, limit=limit)
        assert files.kept - 10 <= max(limit // 8, 16)
        assert files.served + STATUS_CONNECTIONS <= files.accepted <= limit - files.kept


def test_a_repeated_line_is_logged_once_per_interval() -> None:
    """The first line, then one per interval saying how many came meanwhile (a clock
    given, not waited for)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    log = logging.getLogger("test_open_files.interval")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    now = [0.0]
    lines = IntervalLog(log, interval=60, clock=lambda: now[0])
    try:
        for _ in range(10_000):  # 10,000 in 50 s, then 2 more after a minute
            lines(logging.WARNING, "accept", "cannot accept: %s", "EMFILE")
            now[0] += 0.005
        lines(logging.INFO, "late", "closing %s", "a")  # another kind: its own line
        now[0] = 61
        lines(logging.WARNING, "accept", "cannot accept: %s", "EMFILE")
        lines(logging.WARNING, "accept", "cannot accept: %s", "EMFILE")
    finally:
        log.removeHandler(handler)
    assert [r.getMessage() for r in records] == [
        "cannot accept: EMFILE",
        "closing a",
        "cannot accept: EMFILE (and 9999 more like it in the last 61 s)",
    ]


def test_a_limit_of_256_files_leaves_room_for_a_hundred_clients(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    """Keeping 256 files spare left such a process one connection: every request, the
    first ``/healthz`` included, got a 503."""
    overrides = {"spill.root": str(tmp_path / "spill"), "proxy.header_timeout_seconds": 120}
    with serve_with_open_files(provider[1], 256, overrides, tmp_path / "serve.log") as (url, _):
        assert healthz(url) == 200
        assert request(url) == 200
        held = connect_silent(url, 100)
        try:
            assert request(url) == 200  # the 101st connection is served
            assert healthz(url) == 200
        finally:
            for sock in held:
                sock.close()


def test_healthz_answers_while_the_client_connections_are_all_taken(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    """At ``proxy.client_connections`` requests in progress, the next gets a 503 at once,
    but ``/healthz`` answers (an orchestrator must not restart a proxy for being busy),
    and the requests turned away are logged once per interval, not one line each."""
    log = tmp_path / "serve.log"
    overrides = {
        "spill.root": str(tmp_path / "spill"),
        "proxy.header_timeout_seconds": 120,
        "proxy.client_connections": 10,
    }
    with serve_with_open_files(provider[1], 1024, overrides, log) as (url, _):
        started = time.monotonic()
        held = bodies_in_progress(url, 10)
        try:
            assert wait_for(lambda: request(url) == 503)  # their heads read
            assert healthz(url) == 200
            statuses = [request(url) for _ in range(30)]
            assert statuses == [503] * 30
            assert healthz(url) == 200
        finally:
            for sock in held:
                sock.close()
        assert wait_for(lambda: request(url) == 200)
        elapsed = time.monotonic() - started
    lines = [
        line
        for line in log.read_text(encoding="utf-8").splitlines()
        if "turned away" in line or "Exceeded concurrency limit" in line
    ]
    assert 1 <= len(lines) <= 1 + elapsed // LOG_INTERVAL_SECONDS, lines


def test_past_the_limit_the_proxy_stops_accepting_and_a_request_still_gets_through(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    """1,100 connections that send nothing, under a limit of 1,024 files: the proxy holds
    what the limit leaves room for (keeping files for its store and upstreams) and leaves
    the rest in the listen backlog, without an ``accept()`` error; each connection waiting
    there makes room for itself (the one that has waited longest for a head is closed),
    and a normal request behind them is served."""
    log = tmp_path / "serve.log"
    overrides = {"spill.root": str(tmp_path / "spill"), "proxy.header_timeout_seconds": 5}
    with ExitStack() as stack:
        url, pid = stack.enter_context(serve_with_open_files(provider[1], 1024, overrides, log))
        peak = stack.enter_context(peak_open_files(pid))
        held = connect_silent(url, 1100)
        stack.callback(lambda: [sock.close() for sock in held])
        assert request(url, timeout=120) == 200
        assert healthz(url) == 200
        assert 1024 // 2 <= peak[0] <= 1024 - 1024 // 16, f"{peak[0]} files open at most"
    text = log.read_text(encoding="utf-8")
    assert "Too many open files" not in text and "out of system resource" not in text
    assert len(text.splitlines()) <= 20 and len(text) <= 10_000, text[:3000]


def test_accept_errors_are_logged_once_per_interval(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    """When the files run out anyway (here the limit is lowered under the running proxy),
    the failed ``accept()`` is retried a second later, logged once per interval, and the
    proxy serves again once files are free."""
    log = tmp_path / "serve.log"
    overrides = {"spill.root": str(tmp_path / "spill"), "proxy.header_timeout_seconds": 120}
    with serve_with_open_files(provider[1], 1024, overrides, log) as (url, pid):
        assert request(url) == 200
        base = open_fds(pid)
        subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={base + 10}:1024"], check=True)
        started = time.monotonic()
        held = connect_silent(url, 40)  # 10 accepted, then accept() fails
        try:
            assert wait_for(lambda: open_fds(pid) >= base + 10)
            time.sleep(3)  # for some retries, each failing: not a bound on time
            subprocess.run(["prlimit", f"--pid={pid}", "--nofile=1024:1024"], check=True)
        finally:
            for sock in held:
                sock.close()
        assert request(url, timeout=120) == 200
        elapsed = time.monotonic() - started
    text = log.read_text(encoding="utf-8")
    errors = [line for line in text.splitlines() if "Too many open files" in line]
    assert 1 <= len(errors) <= 1 + elapsed // LOG_INTERVAL_SECONDS, errors[:5]
    assert len(text) <= 10_000, text[:3000]


def test_half_open_connections_past_the_limit_give_way_to_a_new_request(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    """300 connections that send part of a head, under a limit of 256 files: the proxy
    holds what the limit leaves room for, the rest wait in the listen backlog, and a
    normal request behind them waited until the head deadline had freed room twice
    (28-29 s). Now each connection waiting there makes the proxy close the one that has
    waited longest for a request head, and the request is served at once; slow clients
    whose requests are in progress (their bodies still coming) are never the ones
    closed, and get their answers."""
    log = tmp_path / "serve.log"
    overrides = {"spill.root": str(tmp_path / "spill"), "proxy.header_timeout_seconds": 15}
    with ExitStack() as stack:
        url, _ = stack.enter_context(serve_with_open_files(provider[1], 256, overrides, log))
        slow = bodies_in_progress(url, 20)
        stack.callback(lambda: [sock.close() for sock in slow])
        held = half_open(url, 300)
        stack.callback(lambda: [sock.close() for sock in held])
        started = time.monotonic()
        assert request(url, timeout=60) == 200
        took = time.monotonic() - started
        assert took < 5, f"a request behind 300 half-open connections took {took:.1f} s"
        for sock in slow:
            sock.sendall(CHAT_BODY[10:])
            sock.settimeout(30)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 "), "a slow client was closed"
    shed = [
        line
        for line in log.read_text(encoding="utf-8").splitlines()
        if "to make room for one waiting to be accepted" in line
    ]
    assert len(shed) == 1, shed  # once per interval, the 177 others counted
