"""How the proxy listens: uvicorn's HTTP/1.1 protocol with a deadline on every request's
head, a cap on client connections, and an open-file limit that leaves room for them.

uvicorn closes a keep-alive connection that stays idle, but not one that starts a request
and never finishes its headers: a thousand such connections (under the usual limit of
1,024 open files) once made every other request time out. Here a connection that has not
sent a whole request head within ``proxy.header_timeout_seconds`` of connecting, or of
starting its next request, is closed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger(__name__)

#: Open files kept for what is not a client connection (the store, logs, upstreams).
SPARE_FILES = 256
#: Seconds an idle keep-alive connection is held. Longer than any client's own idle
#: expiry (httpx and the SDKs built on it: 5 s; Node's undici: 4 s), so a client never
#: sends its next request on a connection the proxy is closing at that moment: that race,
#: at uvicorn's default of 5 s, ended a few requests in a thousand in a ReadError before
#: they were read (no access-log line). nginx holds them 75 s too.
KEEP_ALIVE_SECONDS = 75


def deadlined_protocol(header_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol closing connections whose request head is late."""

    class DeadlinedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
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
                logger.info(
                    "closing a connection from %s: no whole request head within %g s "
                    "(proxy.header_timeout_seconds)", self.client, header_timeout,
                )  # fmt: skip
                self.transport.close()

    return DeadlinedH11Protocol


def connection_limit(wanted: int) -> int:
    """The client connections the process can hold: ``wanted``, but under its open-file
    limit, which is raised to the hard limit first (the usual soft limit is 1,024)."""
    try:
        import resource  # noqa: PLC0415 - POSIX only
    except ImportError:  # Windows: no such limit to raise
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = wanted + SPARE_FILES if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, target), hard))
            soft = max(soft, target)
        except (ValueError, OSError) as exc:
            logger.warning("cannot raise the open-file limit from %d: %s", soft, exc)
    room = max(soft - SPARE_FILES, 1)
    if wanted > room:
        logger.warning("proxy.client_connections is %d, but the open-file limit (%d) leaves "
                       "room for %d: holding %d at most", wanted, soft, room, room)  # fmt: skip
    return min(wanted, room)


def uvicorn_options(settings: Any) -> dict[str, Any]:
    """What ``uvicorn.run`` takes to listen as the ``proxy`` section says."""
    return {
        "http": deadlined_protocol(settings.header_timeout_seconds),
        "limit_concurrency": connection_limit(settings.client_connections),
        "backlog": 2048,
        "timeout_keep_alive": KEEP_ALIVE_SECONDS,
    }
