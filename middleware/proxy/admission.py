"""How many request bodies are cleaned at once, by their size.

Cleaning a body takes about nine times its size while it runs (the bytes, the parsed body,
the messages' exact copies and parsed form, the body written back), and the worker
threads take turns on one interpreter lock: eight 32 MB bodies cleaned at once peaked at
2.5 GB and left the allocator holding 850 MB; one at a time, 0.9 GB and 310 MB, and all
eight were done sooner (99 s instead of 139 s). So bodies are admitted
to cleaning while those being cleaned add up to less than a limit (``proxy.cleaning_bytes``)
— a body alone is always admitted, however large — first come, first served, so a large
body waiting is not overtaken for ever by small ones. Small bodies never wait for each
other: sixteen bodies of 500 KB are cleaned side by side under the default. The default
(8 MiB) is low because bodies being cleaned are held up together when the spill store
hangs (each waits for ``spill.timeout_seconds``), with their parsed form in memory: in the
soak, 32 MiB peaked 34% above the first minute's memory and 8 MiB 24%.

A body waits for its turn for a while at most (``proxy.cleaning_wait_seconds``), in a line
of bodies that add up to a limit at most (``proxy.waiting_bytes``; a body alone may always
wait): when bodies come faster than the proxy can clean them (a spill store that hangs
holds every body being cleaned for its deadline), the line would otherwise grow without
bound, in time and in the memory of the bodies waiting in it. A body turned away is
forwarded as it came.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio


class NotAdmitted(Exception):
    """A body waited its longest for its turn to be cleaned, or the line was full."""


class ByteGate:
    """Admits work of a size while what is admitted stays within ``limit`` bytes (one item
    at a time at least); the others wait in a line of ``line_limit`` bytes at most (one
    item at least). Not thread-safe: used from the event loop."""

    def __init__(self, limit: int, line_limit: int | None = None) -> None:
        self.limit = limit
        self.line_limit = line_limit
        #: Bytes admitted now.
        self.held = 0
        #: Bytes waiting now (those of the line).
        self.waiting = 0
        self._line: deque[tuple[int, anyio.Event]] = deque()

    def _fits(self, size: int) -> bool:
        return self.held == 0 or self.held + size <= self.limit

    @asynccontextmanager
    async def admitted(self, size: int, within: float | None = None) -> AsyncIterator[None]:
        """Wait until ``size`` bytes fit (after those waiting before), hold them inside
        the block. :class:`NotAdmitted` when that takes more than ``within`` seconds."""
        if self._line or not self._fits(size):
            most = self.line_limit
            if self._line and most is not None and self.waiting + size > most:
                raise NotAdmitted(f"the bodies waiting to be cleaned already take {most:,} bytes")
            turn = (size, anyio.Event())
            self._line.append(turn)
            self.waiting += size
            try:
                with anyio.fail_after(within):
                    await turn[1].wait()
            except BaseException as exc:  # cancelled, or late: leave the line
                if turn[1].is_set():
                    self._release(size)  # (given the turn as the deadline fell)
                else:
                    self._line.remove(turn)
                    self.waiting -= size
                    self._admit()
                if isinstance(exc, TimeoutError):
                    raise NotAdmitted(f"not started within {within:g} s") from None
                raise
        else:
            self.held += size
        try:
            yield
        finally:
            self._release(size)

    def _release(self, size: int) -> None:
        self.held -= size
        self._admit()

    def _admit(self) -> None:
        """Let in those waiting, in order, while they fit."""
        while self._line and self._fits(self._line[0][0]):
            size, event = self._line.popleft()
            self.waiting -= size
            self.held += size
            event.set()
