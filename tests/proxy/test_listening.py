"""chatcli-mw serve against clients that never finish: half-open connections are closed
after the request head deadline, connections over the cap get a 503 at once, a body that
stalls gets a 408, and meanwhile a normal request is answered (issue 26, item 2)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from proxy_stack import bodies_in_progress, half_open, serve_process
from stand_in import Provider

#: It times a real wait: it runs in the suite's "timing" group, never beside another such
#: test (pyproject.toml's addopts).
pytestmark = pytest.mark.xdist_group("timing")

HEADERS = {"authorization": "Bearer sk-test"}
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def served(provider: tuple[Provider, str], tmp_path: Path) -> Iterator[str]:
    limits = {
        "proxy.header_timeout_seconds": 1.5,
        "proxy.body_timeout_seconds": 1.5,
        "proxy.client_connections": 40,
        "spill.root": str(tmp_path),
    }
    with serve_process(provider[1], limits) as url:
        yield url


def closed_by_the_server(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1024) == b""
    except (TimeoutError, ConnectionResetError):
        return False


def test_half_open_connections_are_closed_and_never_starve_a_request(served: str) -> None:
    held = half_open(served, 30)
    try:
        answer = httpx.post(served + "/v1/chat/completions", json=BODY, headers=HEADERS, timeout=10)
        assert answer.status_code == 200
        started = time.monotonic()
        assert all(closed_by_the_server(sock, 10) for sock in held)
        assert time.monotonic() - started < 8  # the deadline, not forever
    finally:
        for sock in held:
            sock.close()


def test_requests_over_the_cap_get_a_503_at_once_until_the_others_end(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    """40 requests in progress (their bodies still coming): the next gets a 503 at once.
    Connections that have not sent a whole head do not count: they have no request."""
    limits = {"proxy.client_connections": 40, "spill.root": str(tmp_path)}
    with serve_process(provider[1], limits) as url:
        idle = half_open(url, 20)
        held = bodies_in_progress(url, 40)
        try:
            time.sleep(0.5)  # for the proxy to read their heads
            over = httpx.post(url + "/v1/chat/completions", json=BODY, headers=HEADERS, timeout=5)
            assert over.status_code == 503
        finally:
            for sock in held + idle:
                sock.close()
        time.sleep(0.5)
        ok = httpx.post(url + "/v1/chat/completions", json=BODY, headers=HEADERS, timeout=10)
        assert ok.status_code == 200


def test_a_body_that_stalls_gets_a_408_in_the_providers_shape(served: str) -> None:
    host, port = served.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: k\r\n"
            b"anthropic-version: 2023-06-01\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"model": '
        )
        sock.settimeout(10)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408")
    assert b'"type":"timeout_error"' in answer.replace(b" ", b"")


def test_a_connection_idle_for_longer_than_a_clients_expiry_still_takes_its_next_request(
    served: str,
) -> None:
    """The proxy holds an idle connection longer than clients do (httpx: 5 s), so a
    client's next request never meets a connection the proxy is closing."""
    host, port = served.removeprefix("http://").split(":")
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with socket.create_connection((host, int(port))) as sock:
        sock.settimeout(10)
        sock.sendall(request)
        assert _read_response(sock).startswith(b"HTTP/1.1 200")
        time.sleep(6)  # past httpx's keep-alive expiry, and uvicorn's default
        sock.sendall(request)
        assert _read_response(sock).startswith(b"HTTP/1.1 200")


def _read_response(sock: socket.socket) -> bytes:
    """One whole response (head and Content-Length body): a single recv may stop at the
    head, leaving the body to be mistaken for the next response."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed mid-response: {answer!r}"
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed mid-body: {answer!r}"
        body += chunk
    assert len(body) == length, "more bytes than one response"
    return head + b"\r\n\r\n" + body
