"""A hostile upstream's decompression bomb (issue 36, item 2): about 130 KB of gzip or
deflate that inflates to 128 MiB of newlines, as an event stream and as JSON, served by a
real upstream on loopback through the real proxy. The usage reader inflates a bounded
number of bytes of it (counted, per chunk and in total), the client gets the answer whole
and byte for byte, the ledger counts it ``unread``, and ``/healthz`` answers while it is
being relayed. An ordinary compressed answer is still read, after it reached the client."""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from servers import serving
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route
from waiting import wait_for

from middleware.formats.routes import providers
from middleware.ledger import usage
from middleware.proxy.app import Proxy
from middleware.proxy.build import build_proxy

#: What the bomb inflates to: newlines, as in the issue (about 130 KB of gzip).
BOMB_BYTES = 128 * 1024 * 1024
#: The upstream sends this much of its answer, then waits for the test.
FIRST_PART = 96 * 1024
REQUEST = {
    "model": "claude-sonnet-5",
    "max_tokens": 5,
    "messages": [{"role": "user", "content": "hi"}],
}


@cache
def bomb(encoding: str) -> bytes:
    """:data:`BOMB_BYTES` newlines, compressed as ``encoding`` says (deflate: zlib's
    format, as HTTP's ``deflate`` is)."""
    bits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
    packer = zlib.compressobj(9, zlib.DEFLATED, bits)
    block = b"\n" * (1 << 20)
    return b"".join([packer.compress(block) for _ in range(BOMB_BYTES >> 20)] + [packer.flush()])


@dataclass
class Upstream:
    """A provider that answers every model call with ``body`` (as ``encoding`` and
    ``content_type`` say), in two parts: the first :data:`FIRST_PART` bytes, then, once
    the test sets ``release``, the rest."""

    body: bytes
    encoding: str
    content_type: str
    release: threading.Event = field(default_factory=threading.Event)

    def app(self) -> Starlette:
        async def answer(request: Request) -> StreamingResponse:
            await request.body()

            async def parts() -> Any:
                yield self.body[:FIRST_PART]
                await anyio.to_thread.run_sync(self.release.wait, 120)
                yield self.body[FIRST_PART:]

            return StreamingResponse(
                parts(),
                media_type=self.content_type,
                headers={"content-encoding": self.encoding},
            )

        return Starlette(routes=[Route("/v1/messages", answer, methods=["POST"])])


class _Counted:
    """One decompressor of the usage reader, each call's bytes in and out counted."""

    def __init__(self, inner: Any, inflation: Inflation) -> None:
        self.inner, self.inflation = inner, inflation

    def decompress(self, data: bytes, max_length: int = 0) -> bytes:
        self.inflation.opened_in_time.append(self.inflation.gate.wait(30))
        out: bytes = self.inner.decompress(data, max_length)
        self.inflation.calls.append((len(data), len(out)))
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@dataclass
class Inflation:
    """``zlib`` as the usage reader sees it: what its decompressors were given and gave,
    call by call; each call waits for ``gate`` first (open unless a test closes it)."""

    calls: list[tuple[int, int]] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    #: Whether the gate was open within 30 s, call by call.
    opened_in_time: list[bool] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.gate.set()

    def decompressobj(self, *args: Any) -> _Counted:
        return _Counted(zlib.decompressobj(*args), self)

    def __getattr__(self, name: str) -> Any:
        return getattr(zlib, name)

    @property
    def inflated(self) -> int:
        return sum(out for _, out in self.calls)


@pytest.fixture
def inflation(monkeypatch: pytest.MonkeyPatch) -> Inflation:
    counted = Inflation()
    monkeypatch.setattr(usage, "zlib", counted)
    return counted


@contextmanager
def proxied(upstream: Upstream, tmp_path: Path) -> Iterator[tuple[Proxy, str]]:
    """``upstream`` on loopback and the proxy in front of it."""
    with serving(upstream.app()) as up:
        proxy, app = build_proxy(
            None,
            {
                "proxy.upstreams": {provider.name: up for provider in providers()},
                "spill.root": str(tmp_path / "spill"),
            },
        )
        with serving(app) as url:
            yield proxy, url


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize(
    "content_type", ["text/event-stream", "application/json"], ids=["streamed", "json"]
)
def test_a_decompression_bomb_is_relayed_whole_and_read_no_further_than_the_bound(
    encoding: str, content_type: str, inflation: Inflation, tmp_path: Path
) -> None:
    body = bomb(encoding)
    assert len(body) < 140_000  # the size
    upstream = Upstream(body, encoding, content_type)
    with proxied(upstream, tmp_path) as (proxy, url), httpx.Client(timeout=120) as client:
        received = bytearray()
        headers = {"x-chatcli-session": "bomb"}
        with client.stream("POST", url + "/v1/messages", json=REQUEST, headers=headers) as answer:
            assert answer.status_code == 200
            assert answer.headers["content-encoding"] == encoding
            chunks = answer.iter_raw()
            while len(received) < FIRST_PART:
                received += next(chunks)
            # The upstream holds the rest: the proxy is relaying the bomb.
            health = client.get(url + "/healthz")
            assert health.status_code == 200 and health.json()["status"] == "ok"
            while_relaying = inflation.inflated
            upstream.release.set()
            for chunk in chunks:
                received += chunk
        assert bytes(received) == body  # whole, byte for byte, still compressed
        assert wait_for(lambda: proxy.ledger.total()["requests"] == 1)
        ledger = client.get(url + "/sessions/bomb").json()
        assert ledger["unread"] == 1 and ledger["billed"]["input"] == 0
        assert "chatcli_proxy_usage_unread_total 1.0" in client.get(url + "/metrics").text
    # Per chunk: O(the chunk) (one byte past the bound tells it was reached); in all: a
    # few MiB of the bomb's 128 MiB, and no more once the bound was reached.
    for given, out in inflation.calls:
        assert out <= usage.INFLATION_FLOOR + usage.INFLATION_RATIO * given + 1, inflation.calls
    assert inflation.inflated <= 8 * 1024 * 1024 and inflation.inflated == while_relaying


def test_a_compressed_answer_reaches_the_client_before_it_is_read(
    inflation: Inflation, tmp_path: Path
) -> None:
    """The reader's first call waits until the client has the answer's first bytes: the
    relay did not wait for the reading. The answer is still read and billed."""
    answer_usage = {"input_tokens": 7, "cache_read_input_tokens": 900, "output_tokens": 42}
    events = [
        {"type": "message_start", "message": {"model": "claude-sonnet-5", "usage": answer_usage}},
        {"type": "message_delta", "usage": {"output_tokens": 42}},
    ]
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    body = zlib.compress(text.encode())
    upstream = Upstream(body, "deflate", "text/event-stream")
    upstream.release.set()
    inflation.gate.clear()
    with proxied(upstream, tmp_path) as (proxy, url), httpx.Client(timeout=120) as client:
        headers = {"x-chatcli-session": "small"}
        with client.stream("POST", url + "/v1/messages", json=REQUEST, headers=headers) as answer:
            chunks = answer.iter_raw()
            received = next(chunks)
            inflation.gate.set()
            received += b"".join(chunks)
        assert received == body
        assert wait_for(lambda: proxy.ledger.total()["requests"] == 1)
        ledger = client.get(url + "/sessions/small").json()
    assert inflation.opened_in_time and all(inflation.opened_in_time)
    assert ledger["unread"] == 0
    assert ledger["billed"]["input"] == 7 and ledger["billed"]["cache_read"] == 900
    assert ledger["billed"]["output"] == 42
