"""How the proxy listens: uvicorn's HTTP/1.1 protocol with a deadline on every request's
head, and a listener that accepts connections only while the open-file limit leaves room
for them (:mod:`middleware.proxy.open_files`).

uvicorn closes a keep-alive connection that stays idle, but not one that starts a request
and never finishes its headers: a thousand such connections (under the usual limit of
1,024 open files) once made every other request time out. Here a connection that has not
sent a whole request head within ``proxy.header_timeout_seconds`` of connecting, or of
starting its next request, is closed.

asyncio accepts connections until ``accept()`` fails for want of files, then fails again
for every connection waiting, logging each failure (Python 3.11 retries the whole backlog
at once): 1,100 connections that sent nothing, under a limit of 1,024, wrote 61,000 log
lines in 20 s and a normal request timed out. Here the proxy stops reading its listening
socket when it holds the connections the limit leaves room for, and reads it again when
one closes; an ``accept()`` that fails anyway (the limit lowered under it, files spent
elsewhere) stops it for a second, logged once per interval.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import sys
from functools import partial
from typing import TYPE_CHECKING, Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from middleware.proxy.interval_log import IntervalLog
from middleware.proxy.open_files import OpenFiles, share_open_files

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.types import ASGIApp, Receive, Scope, Send

logger = logging.getLogger(__name__)

#: Seconds an idle keep-alive connection is held. Longer than any client's own idle
#: expiry (httpx and the SDKs built on it: 5 s; Node's undici: 4 s), so a client never
#: sends its next request on a connection the proxy is closing at that moment: that race,
#: at uvicorn's default of 5 s, ended a few requests in a thousand in a ReadError before
#: they were read (no access-log line). nginx holds them 75 s too.
KEEP_ALIVE_SECONDS = 75
#: Connections waiting to be accepted, at most (the kernel may hold fewer: somaxconn).
BACKLOG = 2048
#: The paths answered on connections over ``proxy.client_connections``.
STATUS_PATHS = frozenset({"/healthz", "/metrics"})
#: Seconds before accepting again after ``accept()`` failed for want of a resource.
ACCEPT_RETRY_SECONDS = 1.0
#: Connections accepted at most each time the listening socket is ready, so a flood of
#: them leaves the event loop time for the requests it holds.
ACCEPT_BATCH = 64
#: The ``accept()`` failures that a closed connection or a moment may cure.
OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class Door:
    """The client connections: how many are open, whether one more may be accepted, and
    whether a request on them is served. Used from the event loop only."""

    def __init__(self, files: OpenFiles) -> None:
        self.files = files
        #: The connections made (their protocol has them).
        self.connections: set[asyncio.BaseProtocol] = set()
        #: The file descriptors of connections accepted whose protocol is not made yet.
        self.opening: set[int] = set()
        self.log = IntervalLog(logger)
        self._listeners: list[_Listener] = []

    @property
    def open(self) -> int:
        return len(self.connections) + len(self.opening)

    def made(self, connection: asyncio.BaseProtocol, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self.opening.discard(sock.fileno())
        self.connections.add(connection)

    def lost(self, connection: asyncio.BaseProtocol) -> None:
        self.connections.discard(connection)
        self.resume()

    def resume(self) -> None:
        """Accept again on the listeners that stopped for want of room, if there is."""
        for listener in self._listeners:
            listener.resume()

    def listen(
        self,
        loop: asyncio.AbstractEventLoop,
        server: asyncio.AbstractServer,
        sock: socket.socket,
        factory: Callable[[], asyncio.Protocol],
    ) -> None:
        """Accept ``server``'s connections on ``sock`` here instead of in asyncio."""
        listener = _Listener(self, loop, server, sock, factory)
        self._listeners.append(listener)
        listener.take_over()

    def admitting(self, app: ASGIApp) -> ASGIApp:
        """``app``, answering 503 at once to requests on connections over those served
        but on :data:`STATUS_PATHS`."""

        async def admitted(scope: Scope, receive: Receive, send: Send) -> None:
            if (
                scope["type"] == "http"
                and len(self.connections) > self.files.served
                and scope["path"] not in STATUS_PATHS
            ):
                self.log(logging.WARNING, "busy", "turned away a request with a 503: %d "
                         "client connections open, %d served at once (proxy."
                         "client_connections, under the open-file limit)",
                         len(self.connections), self.files.served)  # fmt: skip
                await _too_many_connections(send, self.files.served)
                return
            await app(scope, receive, send)

        return admitted


async def _too_many_connections(send: Send, served: int) -> None:
    body = (
        f"chatcli-middleware serves {served} client connections at once "
        "(proxy.client_connections, under its open-file limit) and holds as many "
        "already; try again shortly\n"
    ).encode()
    await send({
        "type": "http.response.start",
        "status": 503,
        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()), (b"connection", b"close"),
                    (b"retry-after", b"1")],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body, "more_body": False})


class _Listener:
    """One listening socket, read while the door has room, and paused otherwise."""

    def __init__(
        self,
        door: Door,
        loop: asyncio.AbstractEventLoop,
        server: asyncio.AbstractServer,
        sock: socket.socket,
        factory: Callable[[], asyncio.Protocol],
    ) -> None:
        self.door = door
        self.loop = loop
        self.server = server
        self.sock = sock
        self.factory = factory
        self.reading = False
        self.retrying = False
        self.failures = 0  # accept() failures since one last succeeded
        self._connecting: set[asyncio.Task[Any]] = set()

    def take_over(self) -> None:
        self.loop.remove_reader(self.sock.fileno())  # asyncio's own accepting
        self.resume()

    def resume(self) -> None:
        if self.reading or self.retrying or not self.server.is_serving():
            return
        if self.door.open < self.door.files.accepted:
            self.loop.add_reader(self.sock.fileno(), self._accept)
            self.reading = True

    def _pause(self) -> None:
        if self.reading:
            self.loop.remove_reader(self.sock.fileno())
            self.reading = False

    def _retry(self) -> None:
        self.retrying = False
        self.resume()

    def _accept(self) -> None:
        door = self.door
        for _ in range(ACCEPT_BATCH):
            if door.open >= door.files.accepted:
                self._pause()
                door.log(logging.WARNING, "full", "not accepting connections while %d are "
                         "open, the most the open-file limit (%s) leaves room for "
                         "(proxy.client_connections: %d served at once); they wait in the "
                         "listen backlog", door.open, door.files.limit,
                         door.files.served)  # fmt: skip
                return
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return  # none waiting
            except ConnectionAbortedError:
                continue  # gone before it was accepted
            except OSError as exc:
                self._failed(exc)
                return
            if self.failures:
                door.log(logging.INFO, "accepting", "accepting connections again after %d "
                         "failed accept()s", self.failures)  # fmt: skip
                self.failures = 0
            conn.setblocking(False)
            door.opening.add(conn.fileno())
            task = self.loop.create_task(self.loop.connect_accepted_socket(self.factory, conn))
            self._connecting.add(task)
            task.add_done_callback(partial(self._connected, conn, conn.fileno()))

    def _failed(self, exc: OSError) -> None:
        """``accept()`` failed: stop reading for a while rather than fail in a loop."""
        self.failures += 1
        self._pause()
        self.retrying = True
        self.loop.call_later(ACCEPT_RETRY_SECONDS, self._retry)
        spent = exc.errno in (errno.EMFILE, errno.ENFILE)
        cure = ("; the open-file limit is spent: raise it, or lower proxy.client_connections "
                "or proxy.max_connections" if spent else "")  # fmt: skip
        level = logging.WARNING if exc.errno in OUT_OF_RESOURCES else logging.ERROR
        self.door.log(level, "accept", "cannot accept a connection (%s), trying again every "
                      "%g s%s", exc, ACCEPT_RETRY_SECONDS, cure)  # fmt: skip

    def _connected(self, conn: socket.socket, fd: int, task: asyncio.Task[Any]) -> None:
        self._connecting.discard(task)
        if task.cancelled() or task.exception() is not None:
            self.door.opening.discard(fd)  # never made: counted as opening until now
            conn.close()
            if not task.cancelled():
                self.door.log(
                    logging.WARNING, "connect", "cannot take a connection: %s", task.exception()
                )
        self.door.resume()


def deadlined_protocol(header_timeout: float, door: Door | None = None) -> type[H11Protocol]:
    """uvicorn's h11 protocol closing connections whose request head is late, and telling
    ``door`` of the connections it makes and loses."""
    late_log = IntervalLog(logger)

    class DeadlinedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if door is not None:
                door.made(self, transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._head_timer is None and self._between_requests():
                self._arm()  # the next request starts: its head has a deadline too
            super().data_received(data)
            if not self._between_requests():  # its head came whole
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)
            if door is not None:
                door.lost(self)

        def _between_requests(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self) -> None:
            self._head_timer = self.loop.call_later(header_timeout, self._late)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _late(self) -> None:
            self._head_timer = None
            if self._between_requests() and not self.transport.is_closing():
                late_log(logging.INFO, "late", "closing a connection from %s: no whole "
                         "request head within %g s (proxy.header_timeout_seconds)",
                         self.client, header_timeout)  # fmt: skip
                self.transport.close()

    return DeadlinedH11Protocol


class _DoorServer(uvicorn.Server):
    """uvicorn's server, its listening sockets read by a :class:`Door`."""

    def __init__(self, config: uvicorn.Config, door: Door) -> None:
        super().__init__(config)
        self.door = door

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.started or sockets is None or sys.platform == "win32":
            return  # Windows' event loop has no readers to take over
        loop = asyncio.get_running_loop()
        config = self.config

        def factory() -> asyncio.Protocol:
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config,
                server_state=self.server_state,
                app_state=self.lifespan.state,
                _loop=loop,
            )

        for server, sock in zip(self.servers, sockets, strict=True):
            self.door.listen(loop, server, sock, factory)


def serve(app: ASGIApp, settings: Any, **options: Any) -> None:
    """Run ``app`` with uvicorn as the ``proxy`` section of the policy says (``options``
    go to ``uvicorn.Config``), until the process is told to stop.

    uvicorn's proxy headers are off, whatever ``FORWARDED_ALLOW_IPS`` says (``*`` there let
    any client say it was 127.0.0.1): the proxy reads them itself, from the proxies
    ``proxy.trusted_proxies`` names only (:mod:`middleware.proxy.clients`)."""
    files = share_open_files(settings.client_connections, settings.max_connections)
    door = Door(files)
    config = uvicorn.Config(
        door.admitting(app), host=settings.host, port=settings.port,
        http=deadlined_protocol(settings.header_timeout_seconds, door), backlog=BACKLOG,
        timeout_keep_alive=KEEP_ALIVE_SECONDS, proxy_headers=False,
        forwarded_allow_ips=list(settings.trusted_proxies), **options,
    )  # fmt: skip
    server = _DoorServer(config, door)
    server.run(sockets=listening_sockets(settings.host, settings.port))


def listening_sockets(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to each address ``host`` names, as asyncio binds them for uvicorn
    (``localhost``: 127.0.0.1 and ::1, an IPv6 one for IPv6 only), not listening yet."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise OSError(f"cannot listen on {host!r} (proxy.host, --host): {exc}") from exc
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(found):
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            if os.name == "posix" and sys.platform != "cygwin":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRNOTAVAIL:  # a family the machine lacks (IPv6 in
                    bound.pop().close()  # a container): asyncio skips it too
                    continue
                raise OSError(exc.errno, f"cannot listen on {host} port {port}: "
                              f"{exc.strerror} (set another --port or proxy.port, or stop "
                              "what listens there)") from None  # fmt: skip
    except BaseException:
        for sock in bound:
            sock.close()
        raise
    if not bound:
        raise OSError(
            f"cannot listen on {host!r} (proxy.host, --host): no address of it is this machine's"
        )
    return bound
