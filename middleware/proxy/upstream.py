"""Forwarding to the provider: the URL (always under the upstream's base), keep-alive
connection pools, headers passed through but for the hop-by-hop ones, and answers relayed
chunk by chunk as they arrive.

A streamed answer is never buffered: each chunk the provider sends is written to the client
as it comes (raw, still compressed if it was, so nothing is decoded and encoded again). A
client that goes away cancels the upstream request at once, even while the provider is
still silent (a model thinking before its first token).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote, unquote

import anyio
import httpx
from starlette.types import Receive, Scope, Send

from middleware.errors import MiddlewareError
from middleware.policy.secrets import redact_urls
from middleware.proxy.settings import ProxySettings

logger = logging.getLogger(__name__)

#: The characters a URL's path holds as they are (httpx's own set): every other byte of a
#: request's path is percent-encoded, so the upstream gets the bytes the client sent.
_PATH_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"#<>?`{}')
#: What a server in front of a provider may take for a segment's end: a slash, a
#: backslash (Windows servers, WHATWG URLs), a path parameter's ``;`` (Tomcat, Spring).
_SEGMENT_END = re.compile(r"[/\\;]")


class PathOutsideBase(MiddlewareError, ValueError):
    """A request path that could leave the upstream's base URL: it is not forwarded."""

    def __init__(self, path: str) -> None:
        self.path = path
        shown = path if len(path) <= 200 else path[:200] + "..."
        super().__init__(
            f"the request path {shown!r} has a dot-segment ('.' or '..', also percent-encoded "
            "or between encoded slashes or backslashes), which could take it out of the "
            "upstream's base URL: chatcli-middleware does not forward it; send the path "
            "with its dot-segments resolved"
        )


def forwarded_url(base: str, path: str, query: str) -> str:
    """The URL a request for ``path`` and ``query`` is forwarded to, under ``base``.
    ``path`` is the bytes of the path as the client sent them, as latin-1 text; they are
    forwarded as they came (an encoded slash stays encoded), with those a URL cannot
    hold percent-encoded.

    :raises PathOutsideBase: ``path`` does not start with ``/``, or has a dot-segment as
        it is or as a server in front of the provider may read it: percent-encoding
        decoded as often as it can be, a backslash or ``;`` taken for a segment's end.
    """
    if not path.startswith("/") or _dot_segment(path):
        raise PathOutsideBase(path)
    forwarded = quote(path.encode("latin-1", "replace"), safe=_PATH_SAFE)
    return base.rstrip("/") + forwarded + (f"?{query}" if query else "")


def shown_url(url: str) -> str:
    """``url`` as a log line may show it: without its query (it may hold an API key:
    Gemini's ``?key=``) and without the upstream's password."""
    return redact_urls(url.split("?", 1)[0])


def _dot_segment(path: str) -> bool:
    """Whether a segment of ``path`` is ``.`` or ``..`` once decoded 0, 1, 2... times
    (each decoding shortens it, until one changes nothing)."""
    while True:
        if any(segment in (".", "..") for segment in _SEGMENT_END.split(path)):
            return True
        decoded = unquote(path)
        if decoded == path:
            return False
        path = decoded


#: Headers that describe one connection, not the message (RFC 9110, 7.6.1), never forwarded;
#: ``host`` and ``content-length`` are set again for the new request.
HOP_BY_HOP = frozenset(
    {
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
        "te", "trailer", "trailers", "transfer-encoding", "upgrade",
    }
)  # fmt: skip
REQUEST_DROPPED = HOP_BY_HOP | {"host", "content-length"}


def forwarded_headers(
    headers: Iterable[tuple[bytes, bytes]], *, drop: frozenset[str] = REQUEST_DROPPED
) -> list[tuple[bytes, bytes]]:
    """``headers`` without the hop-by-hop ones (and those ``Connection`` names), as the
    bytes that came: a value in UTF-8 (``X-Title: café``) or any other bytes goes on as
    it was, never decoded and encoded again."""
    pairs = list(headers)
    named = {
        token.strip().lower()
        for name, value in pairs
        if name.lower() == b"connection"
        for token in value.decode("latin-1").split(",")
    }
    dropped = drop | named
    return [(name, value) for name, value in pairs if name.decode("latin-1").lower() not in dropped]


#: Pools the upstream connections are shared among, at most. httpx's pool looks at every
#: connection it holds each time a request starts or ends (an idle one with a system
#: call): one pool of 100 connections under 200 conversations took a third of the proxy's
#: time, and its CPU per request rose by half from 1 to 200 conversations.
POOLS = 16


class Upstream:
    """The connections to the upstreams: :data:`POOLS` keep-alive pools that together
    hold at most ``proxy.max_connections``; each request takes the pool with the fewest
    requests in flight (the first of them on a tie)."""

    def __init__(self, settings: ProxySettings) -> None:
        count = max(1, min(POOLS, settings.max_connections))
        share, extra = divmod(settings.max_connections, count)
        self.pools = [client(settings, share + (i < extra)) for i in range(count)]
        self.in_flight = [0] * count

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[httpx.AsyncClient]:
        """A pool for one request, counted in flight until the block ends."""
        chosen = self.in_flight.index(min(self.in_flight))
        self.in_flight[chosen] += 1
        try:
            yield self.pools[chosen]
        finally:
            self.in_flight[chosen] -= 1

    async def aclose(self) -> None:
        for pool in self.pools:
            await pool.aclose()


def client(settings: ProxySettings, connections: int) -> httpx.AsyncClient:
    """One pool of at most ``connections`` (HTTP/1.1 keep-alive)."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(
            connect=settings.connect_timeout_seconds,
            read=settings.read_timeout_seconds,
            write=settings.read_timeout_seconds,
            # Waiting for a free connection is waiting for another answer to end.
            pool=settings.read_timeout_seconds,
        ),
        limits=httpx.Limits(
            max_connections=connections,
            max_keepalive_connections=connections,
            keepalive_expiry=settings.upstream_idle_seconds,
        ),
        follow_redirects=False,
        trust_env=False,
    )


class Relay:
    """An ASGI response that forwards one request upstream and relays the answer.

    ``on_headers`` is called with the upstream status, the seconds it took and its headers
    once they arrived (for the access log, the latency histogram and the ledger);
    ``on_chunk`` with each chunk of the answer as it came (raw: still compressed if it
    was), once it was passed on to the client; ``on_done`` when the answer ended, with
    whether it was relayed whole.
    ``answer_headers`` are added to the upstream's (the proxy's own, such as the session
    it filed the request under).
    """

    def __init__(
        self,
        upstream: Upstream,
        method: str,
        url: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        *,
        on_headers: Callable[[int, float, httpx.Headers], None],
        on_done: Callable[[bool], None],
        on_error: Callable[[Exception], tuple[int, bytes]],
        on_chunk: Callable[[bytes], None] | None = None,
        answer_headers: Iterable[tuple[str, str]] = (),
    ) -> None:
        self.upstream = upstream
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.on_headers = on_headers
        self.on_done = on_done
        self.on_error = on_error
        self.on_chunk = on_chunk
        self.answer_headers = list(answer_headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        whole = False
        try:
            async with anyio.create_task_group() as group:

                async def relay() -> None:
                    nonlocal whole
                    whole = await self._relay(send)
                    group.cancel_scope.cancel()

                group.start_soon(relay)
                await _wait_for_disconnect(receive)
                group.cancel_scope.cancel()  # the client left: stop talking upstream
        finally:
            self.on_done(whole)

    async def _relay(self, send: Send) -> bool:
        async with self.upstream.lease() as http:
            return await self._relay_on(http, send)

    async def _relay_on(self, http: httpx.AsyncClient, send: Send) -> bool:
        request = http.build_request(self.method, self.url, headers=self.headers, content=self.body)
        started = time.perf_counter()
        try:
            response = await _sent(http, request)
        except httpx.HTTPError as exc:
            status, body = self.on_error(exc)
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", b"application/json")]})  # fmt: skip
            await send({"type": "http.response.body", "body": body})
            return False
        try:
            self.on_headers(response.status_code, time.perf_counter() - started, response.headers)
            headers = forwarded_headers(response.headers.raw, drop=HOP_BY_HOP)
            headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in self.answer_headers]
            await send(
                {"type": "http.response.start", "status": response.status_code, "headers": headers}
            )
            async for chunk in _chunks(response):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if self.on_chunk is not None:  # read once it is on its way: never waited for
                    self._observe(chunk)
            await send({"type": "http.response.body", "body": b""})
            return True
        except httpx.HTTPError as exc:  # the upstream broke off mid-answer: end ours too
            logger.warning("upstream %s broke off its answer: %s", shown_url(self.url), exc)
            return False
        except OSError:  # the client went away while we wrote to it
            return False
        finally:
            await response.aclose()

    def _observe(self, chunk: bytes) -> None:
        """Show ``chunk`` to ``on_chunk``; one that fails is not called again (reading an
        answer is never the reason relaying it fails)."""
        try:
            self.on_chunk(chunk)  # type: ignore[misc]
        except Exception:
            logger.exception("reading an answer of %s failed: read no further", shown_url(self.url))
            self.on_chunk = None


#: What httpcore says when the upstream closed the connection before any byte of an answer.
_CLOSED_UNANSWERED = "Server disconnected without sending a response"


class Unanswered(httpx.RemoteProtocolError):
    """The upstream closed the connection without answering the request sent on it. It is
    not sent again: the upstream may have read it whole and acted on it (a model call
    answered to no one is still billed)."""


async def _sent(http: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    """The upstream's answer to ``request``, sent once.

    A kept-alive connection is used only if the upstream has not closed it (httpcore's
    pool looks at an idle connection as it hands it out, and gives up those idle past
    ``proxy.upstream_idle_seconds``, before the upstream's own timeout), so a connection
    closed unanswered had the request sent on it: the proxy cannot tell whether the
    upstream read it, so it never sends it again, and the client gets a 502.
    """
    opened = False

    async def trace(event: str, info: Mapping[str, Any]) -> None:
        nonlocal opened
        opened = opened or event.startswith("connection.connect_")

    request.extensions["trace"] = trace
    try:
        return await http.send(request, stream=True)
    except httpx.RemoteProtocolError as exc:
        if _CLOSED_UNANSWERED not in str(exc):
            raise
        where = shown_url(str(request.url))
        connection = "a new connection" if opened else "a kept-alive connection"
        logger.warning(
            "upstream %s closed %s without answering the request sent on it: not sent "
            "again (the upstream may have read it and acted on it)",
            where,
            connection,
        )
        raise Unanswered(
            f"the upstream closed {connection} without answering the request sent on it; "
            "it was not sent again, since the upstream may have read it and acted on it: "
            "the upstream's logs say why it closed the connection",
            request=request,
        ) from exc


async def _chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    async for chunk in response.aiter_raw():
        if chunk:
            yield chunk


async def _wait_for_disconnect(receive: Receive) -> None:
    while True:
        message: Mapping[str, Any] = await receive()
        if message["type"] == "http.disconnect":
            return
