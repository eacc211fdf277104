"""An upstream that closes a connection without answering: a request is sent upstream once
(issue 36, item 1: one model call billed twice). Whatever was written to the upstream may
have been read, and acted on, whether or not an answer came: the client gets a 502 in its
provider's shape instead of a second copy. A kept-alive connection the upstream closed
while it was idle is never written to (the request goes out on a new one), and idle
connections are given up before the upstream gives them up (issue 26: the soak's 502)."""

from __future__ import annotations

import json
import logging
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

HEADERS = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
ANSWER = json.dumps({
    "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
    "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",
    "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
}).encode()  # fmt: skip


def body(text: str) -> dict[str, Any]:
    """A request whose body says ``text`` (to count the copies the upstream read of it)."""
    return {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": text}]}


class Upstream(socketserver.ThreadingTCPServer):
    """A raw HTTP/1.1 upstream that reads each request whole (its line, headers and body)
    and answers it, but for the requests ``close_on`` names by (connection, request on
    that connection), both counted from 1: those it closes the connection on without a
    byte of answer. After answering one of ``close_idle`` it closes the connection, idle
    (``idle_closed`` is set then). ``bodies`` holds the body of every request read, per
    connection in order."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        close_on: frozenset[tuple[int, int]] = frozenset(),
        close_idle: frozenset[tuple[int, int]] = frozenset(),
    ) -> None:
        self.close_on = close_on
        self.close_idle = close_idle
        self.idle_closed = threading.Event()
        self.bodies: list[list[bytes]] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def copies(self, text: str) -> int:
        """How many times a body saying ``text`` was read."""
        with self.lock:
            return sum(json.dumps(text).encode() in b for c in self.bodies for b in c)


class _Handler(socketserver.StreamRequestHandler):
    server: Upstream

    def handle(self) -> None:
        with self.server.lock:
            self.server.bodies.append([])
            mine = len(self.server.bodies)
        while True:
            if not self.rfile.readline():
                return
            length = 0
            while (header := self.rfile.readline()) not in (b"\r\n", b""):
                name, _, value = header.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            read = self.rfile.read(length)
            with self.server.lock:
                self.server.bodies[mine - 1].append(read)
                seen = (mine, len(self.server.bodies[mine - 1]))
            if seen in self.server.close_on:
                self.connection.shutdown(socket.SHUT_RDWR)  # the whole body read, no answer
                return
            self.wfile.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                + f"content-length: {len(ANSWER)}\r\n\r\n".encode()
                + ANSWER
            )
            self.wfile.flush()
            if seen in self.server.close_idle:
                self.connection.shutdown(socket.SHUT_RDWR)  # as an idle timeout would
                self.server.idle_closed.set()
                return


@contextmanager
def proxy_before(upstream: Upstream, tmp_path: Path, **overrides: Any) -> Iterator[str]:
    thread = threading.Thread(target=upstream.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{upstream.server_address[1]}"
    _, app = build_proxy(
        None,
        {
            "proxy.anthropic_upstream": url,
            "spill.root": str(tmp_path / "spill"),
            "proxy.max_connections": 1,  # one pool, one connection: the next request reuses it
            **overrides,
        },
    )
    try:
        with serving(app) as proxy_url:
            yield proxy_url
    finally:
        upstream.shutdown()
        upstream.server_close()


def post(url: str, text: str) -> httpx.Response:
    return httpx.post(url + "/v1/messages", json=body(text), headers=HEADERS, timeout=60)


def said(caplog: pytest.LogCaptureFixture) -> str:
    return " ".join(r.getMessage() for r in caplog.records if r.name == "middleware.proxy.upstream")


def test_a_request_the_upstream_read_on_a_new_connection_is_sent_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """It reads the whole body, then closes the new connection without answering: the
    body may have been acted on, so it is not sent again (it once was, on a second
    connection the upstream answered: the client saw a 200, the call was billed twice)."""
    upstream = Upstream(close_on=frozenset({(1, 1)}))
    with caplog.at_level(logging.INFO), proxy_before(upstream, tmp_path) as url:
        answer = post(url, "first")
    assert upstream.copies("first") == 1
    assert answer.status_code == 502
    error = answer.json()["error"]  # Anthropic's shape, which its SDK raises
    assert answer.json()["type"] == "error" and error["type"] == "api_error"
    assert "not sent again" in error["message"]
    assert "a new connection" in said(caplog) and "not sent again" in said(caplog)


def test_a_request_the_upstream_read_on_a_kept_alive_connection_is_sent_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same on a connection reused from the pool: what was written to it may have been
    read; the next request goes out on a new connection."""
    upstream = Upstream(close_on=frozenset({(1, 2)}))
    with caplog.at_level(logging.INFO), proxy_before(upstream, tmp_path) as url:
        assert post(url, "first").status_code == 200
        second = post(url, "second")
        third = post(url, "third")
    assert [upstream.copies(t) for t in ("first", "second", "third")] == [1, 1, 1]
    assert second.status_code == 502 and "not sent again" in second.json()["error"]["message"]
    assert third.status_code == 200 and third.json()["content"][0]["text"] == "hello"
    assert len(upstream.bodies) == 2  # the third on a connection of its own
    assert "a kept-alive connection" in said(caplog) and "a new connection" not in said(caplog)


def test_a_kept_alive_connection_the_upstream_closed_while_idle_is_not_written_to(
    tmp_path: Path,
) -> None:
    """Closed before the next request (an idle timeout), it is given up unwritten: the
    request goes out once, on a new connection, and is answered."""
    upstream = Upstream(close_idle=frozenset({(1, 1)}))
    with proxy_before(upstream, tmp_path) as url:
        assert post(url, "first").status_code == 200
        assert upstream.idle_closed.wait(30)
        second = post(url, "second")
    assert second.status_code == 200 and second.json()["content"][0]["text"] == "hello"
    assert [len(c) for c in upstream.bodies] == [1, 1]
    assert [upstream.copies(t) for t in ("first", "second")] == [1, 1]


def test_idle_connections_are_given_up_before_the_upstream_gives_them_up(
    tmp_path: Path,
) -> None:
    """Within proxy.upstream_idle_seconds the next request reuses the connection; past it,
    a new one is opened (the upstream never closes one the proxy is about to use)."""
    upstream = Upstream()
    with proxy_before(upstream, tmp_path, **{"proxy.upstream_idle_seconds": 0.5}) as url:
        assert post(url, "first").status_code == 200
        assert post(url, "second").status_code == 200  # at once: the same connection
        time.sleep(1.0)
        assert post(url, "third").status_code == 200  # past the idle time: a new one
    assert [len(c) for c in upstream.bodies] == [2, 1]
