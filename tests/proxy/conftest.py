"""Fixtures: the provider stand-in and a proxy in front of it, both on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the proxy tests need the [proxy] extra")

from billing_builders import Clock
from prompt_cache import PromptCache
from proxy_stack import Stack, running
from servers import serving
from stand_in import Provider


@pytest.fixture
def provider() -> Iterator[tuple[Provider, str]]:
    stand_in = Provider()
    with serving(stand_in.app()) as url:
        yield stand_in, url


@pytest.fixture
def stack(provider: tuple[Provider, str], tmp_path: Path) -> Iterator[Stack]:
    with running(provider, tmp_path) as started:
        yield started


@pytest.fixture
def caching() -> Iterator[tuple[Provider, str, Clock]]:
    """A stand-in that bills as the providers' prompt caches do, by a clock the test moves."""
    clock = Clock()
    stand_in = Provider(cache=PromptCache(clock), context_chars=10**8)
    with serving(stand_in.app()) as url:
        yield stand_in, url, clock
