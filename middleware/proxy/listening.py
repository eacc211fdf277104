"""How the proxy listens: uvicorn, its connections read by
:mod:`middleware.proxy.connection` (a deadline on every request's head, heads framed
ambiguously refused), and a listener that accepts connections only while the open-file
limit leaves room for them (:mod:`middleware.proxy.open_files`), as the door says
(:mod:`middleware.proxy.door`).

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

from middleware.proxy.connection import deadlined_protocol
from middleware.proxy.door import Door
from middleware.proxy.framing import MAX_HEAD_BYTES
from middleware.proxy.open_files import share_open_files

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.types import ASGIApp

logger = logging.getLogger(__name__)

#: Seconds an idle keep-alive connection is held. Longer than any client's own idle
#: expiry (httpx and the SDKs built on it: 5 s; Node's undici: 4 s), so a client never
#: sends its next request on a connection the proxy is closing at that moment: that race,
#: at uvicorn's default of 5 s, ended a few requests in a thousand in a ReadError before
#: they were read (no access-log line). nginx holds them 75 s too.
KEEP_ALIVE_SECONDS = 75
#: Connections waiting to be accepted, at most (the kernel may hold fewer: somaxconn).
BACKLOG = 2048
#: Seconds before accepting again after ``accept()`` failed for want of a resource.
ACCEPT_RETRY_SECONDS = 1.0
#: Connections accepted at most each time the listening socket is ready, so a flood of
#: them leaves the event loop time for the requests it holds.
ACCEPT_BATCH = 64
#: The ``accept()`` failures that a closed connection or a moment may cure.
OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class _Listener:
    """One listening socket, read while the door has room; without room, watched for a
    connection to make room for while one may be closed for it; paused otherwise."""

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
        #: What reads the socket now (:meth:`_accept`, :meth:`_full`), if anything does.
        self.reader: Callable[[], None] | None = None
        self.retrying = False
        self.failures = 0  # accept() failures since one last succeeded
        self._connecting: set[asyncio.Task[Any]] = set()

    def take_over(self) -> None:
        """Accept the server's connections here, through the door, instead of in asyncio."""
        self.loop.remove_reader(self.sock.fileno())  # asyncio's own accepting
        self.door.listeners.append(self.resume)
        self.resume()

    def resume(self) -> None:
        if self.retrying or not self.server.is_serving():
            return
        if self.door.open < self.door.files.accepted:
            self._read(self._accept)
        elif self.door.sheddable:
            self._read(self._full)
        else:
            self._pause()

    def _read(self, reader: Callable[[], None]) -> None:
        if self.reader != reader:
            self.loop.add_reader(self.sock.fileno(), reader)  # in place of the one before
            self.reader = reader

    def _pause(self) -> None:
        if self.reader is not None:
            self.loop.remove_reader(self.sock.fileno())
            self.reader = None

    def _retry(self) -> None:
        self.retrying = False
        self.resume()

    def _accept(self) -> None:
        door = self.door
        for _ in range(ACCEPT_BATCH):
            if door.open >= door.files.accepted:
                self.resume()  # watching for one waiting, or paused
                door.log(logging.WARNING, "full", "not accepting connections while %d are "
                         "open, the most the open-file limit (%s) leaves room for "
                         "(proxy.client_connections: %d served at once); they wait in the "
                         "listen backlog, each closing the connection that has waited "
                         "longest for a request head, if one has", door.open,
                         door.files.limit, door.files.served)  # fmt: skip
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

    def _full(self) -> None:
        """A connection waits to be accepted while the door holds all it has room for:
        one waiting for its head gives way (accepting resumes once it is lost)."""
        if self.door.open >= self.door.files.accepted:
            self.door.shed()
        self.resume()

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
            _Listener(self.door, loop, server, sock, factory).take_over()


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
        timeout_keep_alive=KEEP_ALIVE_SECONDS, h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        proxy_headers=False, forwarded_allow_ips=list(settings.trusted_proxies), **options,
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
