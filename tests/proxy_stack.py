"""The provider stand-in and a proxy in front of it, both served on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from servers import free_port, serving
from stand_in import Provider

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
    """A proxy on ``policy`` (with ``overrides`` of dotted keys) in front of ``provider``."""
    stand_in, upstream = provider
    layered = {
        "proxy.anthropic_upstream": upstream,
        "proxy.openai_upstream": upstream,
        "spill.root": str(tmp_path / "spill"),
        **overrides,
    }
    proxy, app = build_proxy(policy, layered)
    with serving(app) as url:
        yield Stack(stand_in, upstream, proxy, url)


@contextmanager
def serve_process(upstream: str, overrides: Mapping[str, Any]) -> Iterator[str]:
    """``chatcli-mw serve`` in a process of its own (a replica), in front of ``upstream``,
    with ``overrides`` of dotted keys set as ``CHATCLI_*`` variables; yields its base URL."""
    port = free_port()
    env = {
        **os.environ,
        "CHATCLI_PROXY__ACCESS_LOG": "false",
        **{
            "CHATCLI_" + key.upper().replace(".", "__"): (
                value if isinstance(value, str) else json.dumps(value)
            )
            for key, value in overrides.items()
        },
    }
    script = Path(sys.executable).parent / "chatcli-mw"
    command = [str(script), "serve", "--port", str(port), "--anthropic-upstream", upstream,
               "--openai-upstream", upstream]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile("w+", encoding="utf-8") as log:  # a pipe could fill up
        process = subprocess.Popen(command, env=env, stderr=log, text=True)
        try:
            deadline = time.monotonic() + 60
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"chatcli-mw serve exited: {log.read()}")
                try:
                    if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("chatcli-mw serve did not start")
                time.sleep(0.05)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=60)
