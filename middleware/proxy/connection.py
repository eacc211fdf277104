"""One client connection: uvicorn's HTTP/1.1 protocol (h11) with a deadline on every
request's head, the heads :mod:`.framing` refuses answered and the connection closed, and
what the connection is doing told to the door that admits connections
(:class:`.listening.Door`).

uvicorn closes a keep-alive connection that stays idle, but not one that starts a request
and never finishes its headers: a thousand such connections (under the usual limit of
1,024 open files) once made every other request time out. Here a connection that has not
sent a whole request head within ``proxy.header_timeout_seconds`` of connecting, or of
starting its next request, is closed.

A refused head gets its status and the connection is closed after it, as RFC 9112 says
for one framed two ways. The answer is sent and the proxy's side shut for writing, then
what the client still sends is read and dropped until it closes too (for
:data:`LINGER_SECONDS` at most): closing a socket with unread bytes in it resets the
connection, and the client may lose the answer before reading it.
"""

from __future__ import annotations

import asyncio
import http
import logging
from typing import Protocol

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from middleware.logs import IntervalLog
from middleware.proxy.framing import Refusal, refusal

logger = logging.getLogger(__name__)

#: Seconds a refused connection is read (and what comes dropped) after its answer, at most.
LINGER_SECONDS = 2.0


class Doorkeeper(Protocol):
    """What a connection tells of itself to whoever admits connections."""

    def made(self, connection: asyncio.BaseProtocol, transport: asyncio.BaseTransport) -> None:
        """The connection is open (and waits for a request head)."""

    def requesting(self, connection: asyncio.BaseProtocol) -> None:
        """A request's head came whole: the request is in progress."""

    def waiting_for_head(
        self, connection: asyncio.BaseProtocol, transport: asyncio.BaseTransport
    ) -> None:
        """The request was answered: the connection waits for the next one's head."""

    def lost(self, connection: asyncio.BaseProtocol) -> None:
        """The connection is closed."""


def deadlined_protocol(header_timeout: float, door: Doorkeeper | None = None) -> type[H11Protocol]:
    """uvicorn's h11 protocol closing connections whose request head is late, refusing
    heads framed ambiguously or oversized, and telling ``door`` of the connections it
    makes and loses."""
    log_line = IntervalLog(logger)

    class DeadlinedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _linger_timer: asyncio.TimerHandle | None = None
        #: The connection's head was refused: what comes after is dropped.
        _refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if door is not None:
                door.made(self, transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return  # read to be dropped: see the module's text
            if self._head_timer is None and self._between_requests():
                self._arm()  # the next request starts: its head has a deadline too
            super().data_received(data)
            if not self._between_requests():  # its head came whole
                self._disarm()
                if door is not None:
                    door.requesting(self)

        def on_response_complete(self) -> None:
            super().on_response_complete()  # may start a request that came meanwhile
            if door is not None and not self.transport.is_closing():
                if self._between_requests():
                    door.waiting_for_head(self, self.transport)
                else:
                    door.requesting(self)

        def handle_events(self) -> None:
            """h11 reads what came, once :func:`.framing.refusal` has seen a head
            before it does."""
            if self._refused or self.transport.is_closing():
                return
            if self.conn.their_state is h11.IDLE:  # a head, whole or in part, comes first
                refused = refusal(self.conn.trailing_data[0])
                if refused is not None:
                    self._refuse(refused)
                    return
            super().handle_events()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._linger_timer is not None:
                self._linger_timer.cancel()
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
                log_line(logging.INFO, "late", "closing a connection from %s: no whole "
                         "request head within %g s (proxy.header_timeout_seconds)",
                         self.client, header_timeout)  # fmt: skip
                self.transport.close()

        def _refuse(self, refused: Refusal) -> None:
            """Answer ``refused``'s status, then close the connection (lingering)."""
            self._refused = True
            log_line(logging.INFO, "refused", "refused a request from %s with a %d: %s",
                     self.client, refused.status, refused.reason)  # fmt: skip
            body = f"{refused.reason}\n".encode()
            answer = h11.Response(
                status_code=refused.status,
                reason=http.HTTPStatus(refused.status).phrase.encode(),
                headers=[(b"content-type", b"text/plain; charset=utf-8"),
                         (b"content-length", str(len(body)).encode()), (b"connection", b"close")],
            )  # fmt: skip
            self.transport.write(self.conn.send(answer))
            self.transport.write(self.conn.send(h11.Data(data=body)))
            self.transport.write(self.conn.send(h11.EndOfMessage()))
            if not self.transport.can_write_eof():
                self.transport.close()
                return
            self.transport.write_eof()  # the client reads the answer, then the end
            self._linger_timer = self.loop.call_later(LINGER_SECONDS, self.transport.close)

    return DeadlinedH11Protocol
