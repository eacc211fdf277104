"""An upstream that closes a kept-alive connection as the proxy reuses it (its idle timeout
and the pool's ran out together: 5 s in uvicorn, Node and httpx alike) gets the request
again on a new connection; the client never sees a 502 the proxy caused (issue 26: the
soak's one failure)."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette", reason="the proxy tests need the [proxy] extra")

from servers import serving

from middleware.proxy.build import build_proxy

BODY = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
HEADERS = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
ANSWER = json.dumps({
    "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
    "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",
    "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
}).encode()  # fmt: skip


class Upstream(socketserver.ThreadingTCPServer):
    """An HTTP/1.1 upstream that answers the first request of each connection and closes
    the connection on the next one without a byte (``closes_every``: closes every request
    unanswered). ``requests`` counts the requests read, per connection in order."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, *, closes_every: bool = False) -> None:
        self.closes_every = closes_every
        #: Answer every request, kept-alive connections too (an upstream that does not
        #: close them).
        self.answers_all = False
        self.requests: list[int] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(socketserver.StreamRequestHandler):
    server: Upstream

    def handle(self) -> None:
        with self.server.lock:
            self.server.requests.append(0)
            mine = len(self.server.requests) - 1
        while True:
            line = self.rfile.readline()
            if not line:
                return
            length = 0
            while (header := self.rfile.readline()) not in (b"\r\n", b""):
                name, _, value = header.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            self.rfile.read(length)
            with self.server.lock:
                self.server.requests[mine] += 1
                seen = self.server.requests[mine]
            if self.server.closes_every or (seen > 1 and not self.server.answers_all):
                self.connection.shutdown(socket.SHUT_RDWR)  # as an idle timeout would
                return
            self.wfile.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                + f"content-length: {len(ANSWER)}\r\n\r\n".encode() + ANSWER
            )  # fmt: skip
            self.wfile.flush()


@contextmanager
def proxy_before(upstream: Upstream, tmp_path: Path, **overrides: Any) -> Iterator[str]:
    thread = threading.Thread(target=upstream.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{upstream.server_address[1]}"
    _, app = build_proxy(None, {
        "proxy.anthropic_upstream": url, "spill.root": str(tmp_path / "spill"),
        "proxy.max_connections": 1,  # one pool, one connection: the next request reuses it
        **overrides,
    })  # fmt: skip
    try:
        with serving(app) as proxy_url:
            yield proxy_url
    finally:
        upstream.shutdown()
        upstream.server_close()


def test_a_kept_alive_connection_closed_unanswered_is_tried_again_on_a_new_one(
    tmp_path: Path,
) -> None:
    upstream = Upstream()
    with proxy_before(upstream, tmp_path) as url:
        for _ in range(3):
            answer = httpx.post(url + "/v1/messages", json=BODY, headers=HEADERS, timeout=30)
            assert answer.status_code == 200, answer.text
            assert answer.json()["content"][0]["text"] == "hello"
    # each later request went out on the connection kept alive, found it closed, and was
    # sent again on a new one: never answered twice
    assert upstream.requests == [2, 2, 1]


def test_an_upstream_that_never_answers_is_tried_once_more_then_a_502(tmp_path: Path) -> None:
    upstream = Upstream(closes_every=True)
    with proxy_before(upstream, tmp_path) as url:
        answer = httpx.post(url + "/v1/messages", json=BODY, headers=HEADERS, timeout=30)
    assert answer.status_code == 502
    assert "without sending a response" in answer.json()["error"]["message"]
    assert sum(upstream.requests) == 2


def test_idle_connections_are_given_up_before_the_upstream_gives_them_up(
    tmp_path: Path,
) -> None:
    """Within proxy.upstream_idle_seconds the next request reuses the connection; past it,
    a new one is opened (the upstream never closes one the proxy is about to use)."""
    upstream = Upstream(closes_every=False)
    upstream.answers_all = True
    with proxy_before(upstream, tmp_path, **{"proxy.upstream_idle_seconds": 0.5}) as url:
        post = lambda: httpx.post(url + "/v1/messages", json=BODY, headers=HEADERS)  # noqa: E731
        assert post().status_code == 200
        assert post().status_code == 200  # at once: the same connection
        time.sleep(1.0)
        assert post().status_code == 200  # past the idle time: a new one
    assert upstream.requests == [2, 1]
