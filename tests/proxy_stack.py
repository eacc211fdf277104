"""The provider stand-in and a proxy in front of it, both served on loopback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from servers import free_port, serving
from stand_in import Provider

from middleware.formats.routes import providers
from middleware.proxy.app import Proxy
from middleware.proxy.build import build_proxy


@dataclass
class Stack:
    provider: Provider
    upstream: str
    proxy: Proxy
    url: str


@contextmanager
def running(
    provider: tuple[Provider, str], tmp_path: Path, policy: str | None = None, **overrides: Any
) -> Iterator[Stack]:
    """A proxy on ``policy`` (with ``overrides`` of dotted keys) in front of ``provider``,
    its spill folder and records database in ``tmp_path`` (as a machine of its own)."""
    stand_in, upstream = provider
    layered = {
        "proxy.upstreams": {provider.name: upstream for provider in providers()},
        "spill.root": str(tmp_path / "spill"),
        "ledger.url": f"sqlite:///{tmp_path / 'records.sqlite'}",
        **overrides,
    }
    proxy, app = build_proxy(policy, layered)
    with serving(app) as url:
        yield Stack(stand_in, upstream, proxy, url)


@contextmanager
def serve_process(
    upstream: str,
    overrides: Mapping[str, Any],
    *,
    log: Path | None = None,
    policy: str | None = None,
    host: str | None = None,
    env: Mapping[str, str] | None = None,
    options: Sequence[str] = (),
) -> Iterator[str]:
    """``chatcli-mw serve`` in a process of its own (a replica), in front of ``upstream``,
    with ``overrides`` of dotted keys set as ``CHATCLI_*`` variables; yields its base URL.
    With ``log``, its stderr (the access log among it) is written there; with ``host``, it
    listens there (``--host``); ``env`` is added to its environment, ``options`` to its
    command line."""
    started = serve_process_pid(
        upstream, overrides, log=log, policy=policy, host=host, env=env, options=options
    )
    with started as (url, _):
        yield url


@contextmanager
def serve_process_pid(
    upstream: str,
    overrides: Mapping[str, Any],
    *,
    log: Path | None = None,
    policy: str | None = None,
    host: str | None = None,
    env: Mapping[str, str] | None = None,
    options: Sequence[str] = (),
) -> Iterator[tuple[str, int]]:
    """:func:`serve_process`, yielding the process id beside the URL (to read its memory)."""
    handle = serve_process_handle(
        upstream, overrides, log=log, policy=policy, host=host, env=env, options=options
    )
    with handle as (url, process):
        yield url, process.pid


@contextmanager
def serve_process_handle(
    upstream: str,
    overrides: Mapping[str, Any],
    *,
    log: Path | None = None,
    policy: str | None = None,
    host: str | None = None,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
    options: Sequence[str] = (),
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """:func:`serve_process`, yielding the process beside the URL (to stop it and time
    its exit); it is terminated at the end unless it exited. ``port``: where a replica
    killed before listened (else a free one)."""
    port = free_port() if port is None else port
    environment = {
        **os.environ,
        **(env or {}),
        "CHATCLI_PROXY__ACCESS_LOG": "true" if log is not None else "false",
        **{
            "CHATCLI_" + key.upper().replace(".", "__"): (
                value if isinstance(value, str) else json.dumps(value)
            )
            for key, value in overrides.items()
        },
    }
    script = Path(sys.executable).parent / "chatcli-mw"
    command = [str(script), "serve", "--port", str(port)]
    for provider in providers():  # every provider's requests go to the stand-in
        command += ["--upstream", f"{provider.name}={upstream}"]
    if policy is not None:
        command += ["--policy", policy]
    if host is not None:
        command += ["--host", host]
    command += options
    url = f"http://{host if host not in (None, '0.0.0.0') else '127.0.0.1'}:{port}"
    opened = log.open("w+", encoding="utf-8") if log is not None else None
    with opened or tempfile.TemporaryFile("w+", encoding="utf-8") as written:  # a pipe fills
        process = subprocess.Popen(command, env=environment, stderr=written, text=True)
        try:
            deadline = time.monotonic() + 60
            while True:
                if process.poll() is not None:
                    written.seek(0)
                    raise RuntimeError(f"chatcli-mw serve exited: {written.read()}")
                try:
                    if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("chatcli-mw serve did not start")
                time.sleep(0.05)
            yield url, process
        finally:
            process.terminate()
            process.wait(timeout=60)


def access_log(path: Path) -> list[dict[str, Any]]:
    """The access-log lines (one JSON object per request) a serve process wrote to
    ``path``, among its other log lines."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if not line.endswith("\n"):
            break  # still being written
        start = line.find('{"method"')
        if start != -1:
            lines.append(json.loads(line[start:]))
    return lines


#: A chat request's body, and the head of it that the helpers below send.
CHAT_BODY = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
CHAT_HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n"
    b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(CHAT_BODY)
)


def half_open(url: str, count: int) -> list[socket.socket]:
    """``count`` connections that start a request and never finish its headers (a proxy
    short of room may close the first before the last are made)."""
    host, port = url.removeprefix("http://").split(":")
    held = []
    for _ in range(count):
        held.append(socket.create_connection((host, int(port)), timeout=30))
        with suppress(ConnectionError):
            held[-1].sendall(CHAT_HEAD[:60])
    return held


def bodies_in_progress(url: str, count: int) -> list[socket.socket]:
    """``count`` slow clients whose requests are in progress: a whole head, then the
    first bytes of :data:`CHAT_BODY`; send them the rest to have them answered."""
    host, port = url.removeprefix("http://").split(":")
    held = []
    for _ in range(count):
        held.append(socket.create_connection((host, int(port)), timeout=30))
        held[-1].sendall(CHAT_HEAD + CHAT_BODY[:10])
    return held
