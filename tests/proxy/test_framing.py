"""chatcli-mw serve against requests framed ambiguously or oversized (issue 43, item 10),
sent over raw sockets to a real serve process: each gets a 4xx and a closed connection,
never reaches the upstream, and leaves no traceback in the log.

h11, which uvicorn reads requests with, takes a request with both ``Content-Length`` and
``Transfer-Encoding`` by the latter and keeps the connection open for the bytes after it
(RFC 9112 §6.3: a server MUST close it, the message may smuggle a second request past a
server in front that read it by its ``Content-Length``); it unfolds folded header lines,
ends lines at a bare LF and reads ``Content-Length: 2, 2``; it reads a head of any size
that comes in one read (a 100 KB request line was relayed, and ended in a 500 and a
traceback). Already refused with a 400 and a closed connection, and not tested again here:
a signed ``Content-Length`` (``+2``, ``-2``), two that differ, a transfer coding other than
chunked, a repeated ``Transfer-Encoding``, a space before a header's colon, a bare CR, no
``Host``."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest
from proxy_stack import serve_process
from servers import serving
from stand_in import Provider

from middleware.proxy.framing import MAX_HEAD_BYTES, MAX_REQUEST_LINE_BYTES

CHAT = b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer k\r\n"
JSON = b"Content-Type: application/json\r\n"
BODY = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
SMUGGLED = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
CHUNKED_BODY = b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)


class Served:
    def __init__(self, url: str, provider: Provider, log: Path) -> None:
        self.url, self.provider, self.log = url, provider, log

    def exchange(self, data: bytes) -> tuple[bytes, bool]:
        """What the proxy answers to ``data`` sent on a new connection, and whether it
        closed the connection after (rather than wait for more)."""
        host, port = self.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as sock:
            sock.settimeout(5)
            with suppress(BrokenPipeError, ConnectionResetError):  # closed before it all
                sock.sendall(data)  # went: the answer is read below
            answer = b""
            try:
                while chunk := sock.recv(65536):
                    answer += chunk
            except TimeoutError:
                return answer, False
            except ConnectionResetError:
                pass
            return answer, True


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("framing")
    provider = Provider()
    log = folder / "serve.log"
    overrides = {"spill.root": str(folder / "spill")}
    with serving(provider.app()) as upstream, serve_process(upstream, overrides, log=log) as url:
        yield Served(url, provider, log)


def responses(answer: bytes) -> list[bytes]:
    """The status lines of the responses in ``answer``."""
    return [line for line in answer.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        pytest.param(CHAT + JSON + b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n"
                     % (len(CHUNKED_BODY) + len(SMUGGLED)) + CHUNKED_BODY + SMUGGLED, 400,
                     id="content-length-and-transfer-encoding"),
        pytest.param(CHAT + JSON + b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n"
                     % len(CHUNKED_BODY) + CHUNKED_BODY, 400,
                     id="transfer-encoding-and-content-length"),
        pytest.param(b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n", 414,
                     id="request-line-of-100-kb"),
        pytest.param(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 100_000
                     + b"\r\n\r\n", 431, id="header-of-100-kb"),
        pytest.param(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n"
                     + b"".join(b"X-H%d: v\r\n" % n for n in range(8000)) + b"\r\n", 431,
                     id="8000-headers"),
        pytest.param(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-A: a\r\n b\r\n\r\n", 400,
                     id="obsolete-line-folding"),
        pytest.param(CHAT + JSON + b"Content-Length: %d, %d\r\n\r\n" % (len(BODY), len(BODY))
                     + BODY, 400, id="content-length-list"),
        pytest.param(CHAT + JSON + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
                     % (len(BODY), len(BODY)) + BODY, 400, id="content-length-twice"),
        pytest.param(b"GET /healthz HTTP/1.1\nHost: localhost\n\n", 400, id="bare-lf"),
        pytest.param(b"POST /v1/chat/completions HTTP/1.0\r\nHost: localhost\r\n" + JSON
                     + b"Transfer-Encoding: chunked\r\n\r\n" + CHUNKED_BODY, 400,
                     id="transfer-encoding-in-http-1.0"),
        pytest.param(CHAT + JSON + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n" + BODY
                     + b"\r\n0\r\n\r\n", 400, id="bad-chunk-size"),
        pytest.param(CHAT + JSON + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n" % len(BODY)
                     + BODY + b"XX0\r\n\r\n", 400, id="chunk-without-its-crlf"),
    ],
)  # fmt: skip
def test_an_ambiguous_or_oversized_request_is_refused_and_its_connection_closed(
    served: Served, request_bytes: bytes, status: int
) -> None:
    accepted = len(served.provider.accepted)
    logged = len(served.log.read_bytes())
    answer, closed = served.exchange(request_bytes)
    time.sleep(0.2)  # for the request's task to end (and log a traceback, if it does)
    assert responses(answer) and responses(answer)[0].startswith(b"HTTP/1.1 %d " % status), answer[
        :300
    ]
    assert len(responses(answer)) == 1, answer[:600]  # nothing smuggled after it
    assert closed, "the connection was kept open after the refusal"
    assert len(served.provider.accepted) == accepted  # never relayed
    log = served.log.read_bytes()[logged:].decode("utf-8", "replace")
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log[:3000]


def test_heads_up_to_the_limits_are_served(served: Served) -> None:
    """The limits refuse only what is over them: a request line and a head just under
    each are answered (``/healthz``: a GET that reaches no upstream)."""
    line = b"GET /healthz?" + b"a" * (MAX_REQUEST_LINE_BYTES - 40) + b" HTTP/1.1\r\n"
    assert len(line) <= MAX_REQUEST_LINE_BYTES
    answer, _ = served.exchange(line + b"Host: localhost\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
    head = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX-Big: "
    big = head + b"a" * (MAX_HEAD_BYTES - len(head) - 100) + b"\r\n\r\n"
    answer, _ = served.exchange(big)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]


def test_a_client_that_goes_mid_body_leaves_no_traceback(served: Served) -> None:
    """A body cut short by the client closing is the client's end, not an error of the
    proxy's."""
    logged = len(served.log.read_bytes())
    host, port = served.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(CHAT + JSON + b"Content-Length: 1000\r\n\r\n" + BODY[:10])
    time.sleep(1)  # for the proxy to read the body as far as it goes
    answer, _ = served.exchange(
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    assert answer.startswith(b"HTTP/1.1 200 ")  # the proxy has read what came before
    log = served.log.read_bytes()[logged:].decode("utf-8", "replace")
    assert "Traceback" not in log, log[:3000]
