"""The door client connections come through: how many are open, whether one more may be
accepted (:mod:`middleware.proxy.listening` reads the listening socket as it says), which
one gives way to it when there is no room, and whether a request on them is served.

The proxy holds as many connections as the open-file limit leaves room for
(:mod:`middleware.proxy.open_files`), the others waiting in the listen backlog. Connections
that sent part of a head, or nothing, held that room until their head deadline: 300 of
them under a limit of 256 files kept a normal request behind them waiting 28-29 s, two
deadlines. Here, while the proxy holds all it has room for and a connection waits to be
accepted, the connection that has waited longest for a request head (since it connected,
or since its last answer, as nginx reuses idle keep-alive connections) is closed to make
room for it; one whose request is in progress, its body or its answer still coming, never
is. And a request is turned away with a 503 only when ``proxy.client_connections`` others
are in progress, not merely open.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import TYPE_CHECKING

from middleware.logs import IntervalLog
from middleware.proxy.open_files import OpenFiles

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.types import ASGIApp, Receive, Scope, Send

if sys.platform != "win32":  # (no door on Windows: :mod:`.listening`)
    import fcntl
    import termios

logger = logging.getLogger(__name__)

#: The paths answered on connections over ``proxy.client_connections``.
STATUS_PATHS = frozenset({"/healthz", "/metrics"})


class Door:
    """The client connections: how many are open, whether one more may be accepted, which
    one gives way to it when there is no room, and whether a request on them is served.
    Used from the event loop only."""

    def __init__(self, files: OpenFiles) -> None:
        self.files = files
        #: The connections made (their protocol has them).
        self.connections: set[asyncio.BaseProtocol] = set()
        #: Those waiting for a request head (none in progress), the longest waiting first:
        #: their transport, and since when they wait.
        self.waiting: dict[asyncio.BaseProtocol, tuple[asyncio.BaseTransport, float]] = {}
        #: Those closed to make room, not lost yet.
        self.shedding: set[asyncio.BaseProtocol] = set()
        #: Requests in progress (but on :data:`STATUS_PATHS`).
        self.serving = 0
        #: The file descriptors of connections accepted whose protocol is not made yet.
        self.opening: set[int] = set()
        self.log = IntervalLog(logger)
        #: Called when a connection may be accepted, or one may be closed to make room.
        self.listeners: list[Callable[[], None]] = []

    @property
    def open(self) -> int:
        return len(self.connections) + len(self.opening)

    @property
    def sheddable(self) -> bool:
        """Whether a connection may be closed to make room (none is being closed)."""
        return bool(self.waiting) and not self.shedding

    def made(self, connection: asyncio.BaseProtocol, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self.opening.discard(sock.fileno())
        self.connections.add(connection)
        self.waiting_for_head(connection, transport)

    def requesting(self, connection: asyncio.BaseProtocol) -> None:
        """``connection``'s request head came whole: it is never closed to make room."""
        self.waiting.pop(connection, None)

    def waiting_for_head(
        self, connection: asyncio.BaseProtocol, transport: asyncio.BaseTransport
    ) -> None:
        """``connection`` is new, or has been answered: it waits for a request head."""
        if connection in self.connections:
            self.waiting.pop(connection, None)
            self.waiting[connection] = (transport, asyncio.get_running_loop().time())
            self.resume()  # a connection in the backlog may take its place

    def lost(self, connection: asyncio.BaseProtocol) -> None:
        self.connections.discard(connection)
        self.waiting.pop(connection, None)
        self.shedding.discard(connection)
        self.resume()

    def shed(self) -> bool:
        """Close the connection that has waited longest for a request head, to make room
        for one waiting to be accepted; whether there was one. One with bytes not read
        yet is not closed: just accepted, its head has come and is about to be read."""
        oldest = next((connection for connection, (transport, _) in self.waiting.items()
                       if not transport.is_closing() and not _unread(transport)), None)  # fmt: skip
        if oldest is None:
            return False
        transport, since = self.waiting.pop(oldest)
        self.shedding.add(oldest)
        transport.close()
        self.log(logging.WARNING, "shed", "closed a connection from %s after %.1f s waiting "
                 "for a request head, to make room for one waiting to be accepted: %d are "
                 "open, the most the open-file limit (%s) leaves room for",
                 transport.get_extra_info("peername"), asyncio.get_running_loop().time() - since,
                 self.open, self.files.limit)  # fmt: skip
        return True

    def resume(self) -> None:
        """Accept again on the listeners that stopped for want of room, if there is (or
        watch for a connection to make room for, if one may be closed)."""
        for resume in self.listeners:
            resume()

    def admitting(self, app: ASGIApp) -> ASGIApp:
        """``app``, answering 503 at once to a request while as many as are served are in
        progress (but on :data:`STATUS_PATHS`)."""

        async def admitted(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or scope["path"] in STATUS_PATHS:
                await app(scope, receive, send)
                return
            if self.serving >= self.files.served:
                self.log(logging.WARNING, "busy", "turned away a request with a 503: %d "
                         "requests in progress, %d served at once (proxy."
                         "client_connections, under the open-file limit)",
                         self.serving, self.files.served)  # fmt: skip
                await _too_many_connections(send, self.files.served)
                return
            self.serving += 1
            try:
                await app(scope, receive, send)
            finally:
                self.serving -= 1

        return admitted


def _unread(transport: asyncio.BaseTransport) -> bool:
    """Whether bytes came on ``transport``'s socket that the proxy has not read yet."""
    sock = transport.get_extra_info("socket")
    if sock is None or sys.platform == "win32":
        return False
    try:
        waiting = fcntl.ioctl(sock.fileno(), termios.FIONREAD, bytes(4))
    except OSError:
        return False
    return int.from_bytes(waiting, sys.byteorder) > 0


async def _too_many_connections(send: Send, served: int) -> None:
    body = (
        f"chatcli-middleware serves {served} requests at once "
        "(proxy.client_connections, under its open-file limit) and has as many in "
        "progress already; try again shortly\n"
    ).encode()
    await send({
        "type": "http.response.start",
        "status": 503,
        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()), (b"connection", b"close"),
                    (b"retry-after", b"1")],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body, "more_body": False})
