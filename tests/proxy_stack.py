"""The provider stand-in and a proxy in front of it, both served on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servers import serving
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
