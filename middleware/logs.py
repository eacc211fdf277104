"""Log lines that may repeat many times a second, once per interval.

A hostile client or an exhausted limit can make the same line come thousands of times a
second: a thousand connections that send nothing, or ``accept()`` failing for want of
files, once wrote 61,000 lines (27.5 MB) in 20 s and kept the event loop busy writing them.
Such a line is logged the first time, then at most once per interval, saying how many
came meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

#: Seconds between two lines of the same kind.
LOG_INTERVAL_SECONDS = 60.0


class IntervalLog:
    """A logger's lines, each kind (a fixed key) logged once per ``interval`` at most;
    thread-safe (the event loop and the threads that write records and spills share one)."""

    def __init__(
        self,
        log: logging.Logger,
        interval: float = LOG_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = log
        self.interval = interval
        self.clock = clock
        #: When each kind was last logged, and how many came since (keys are fixed in the
        #: code, so this holds a handful of entries).
        self._last: dict[str, float] = {}
        self._since: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, level: int, kind: str, message: str, *args: object) -> bool:
        """Log ``message % args`` unless a line of ``kind`` was logged within the
        interval (then count it); whether it was logged."""
        now = self.clock()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.interval:
                self._since[kind] += 1
                return False
            more = self._since.get(kind, 0)
            self._last[kind] = now
            self._since[kind] = 0
        if more and last is not None:
            message += " (and %d more like it in the last %.0f s)"
            args = (*args, more, now - last)
        self.log.log(level, message, *args)
        return True
