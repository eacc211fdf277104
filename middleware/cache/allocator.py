"""Freed memory given back to the system, so the process shrinks when state is released.

CPython takes texts and request bodies larger than 512 bytes from the C allocator, and
glibc's keeps what is freed between objects still alive for reuse: after the state of
many sessions is released, the process's resident size hardly goes down (40 sessions of
4.5 MB, released: 2.1 GB resident; after ``malloc_trim``, 0.5 GB). So when a good deal was
released (a session pool's state, large request bodies once answered), ``malloc_trim(0)``
is called in a thread of its own (it walks the whole heap: tens of milliseconds per
gigabyte, a quarter of a second the first time), :data:`MIN_INTERVAL` seconds later (what
is released with it is freed by then), and at most that often.

A server also keeps the allocator to :data:`ARENAS` arenas (:func:`tune`): glibc gives
each thread that allocates at once an arena of its own, up to eight per core, each holding
its own free memory (the proxy cleans in a pool of worker threads; 44 MB less after 200
conversations). Linux with glibc only; elsewhere nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

#: Bytes released (an estimate) worth a trim; less is left to the allocator to reuse.
MIN_BYTES = 16 * 1024 * 1024
#: Seconds from a release to its trim, and between two trims at least (releases meanwhile
#: wait for the next one).
MIN_INTERVAL = 5.0
#: Arenas a server's allocator keeps (glibc's ``M_ARENA_MAX``): the threads hold the GIL
#: while they allocate, so more would only hold more free memory.
ARENAS = 2
_M_ARENA_MAX = -8


def _libc_function(name: str) -> Callable[..., int] | None:
    """A function of glibc, or ``None`` (another system or C library: musl has neither
    ``malloc_trim`` nor ``mallopt``)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        function: Callable[..., int] = getattr(libc, name)
    except (OSError, AttributeError):
        return None
    return function


def tune() -> bool:
    """Keep the allocator to :data:`ARENAS` arenas, unless ``MALLOC_ARENA_MAX`` says
    otherwise (what a long-running server calls before its threads start). Returns
    whether it was set."""
    mallopt = _libc_function("mallopt")
    if mallopt is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    return bool(mallopt(_M_ARENA_MAX, ARENAS))


class Trimmer:
    """Calls ``trim`` in a thread of its own ``interval`` seconds after ``min_bytes`` were
    released, then every ``interval`` seconds while releases go on (thread-safe)."""

    def __init__(
        self,
        trim: Callable[[int], int] | None,
        min_bytes: int = MIN_BYTES,
        interval: float = MIN_INTERVAL,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._trim = trim
        self.min_bytes = min_bytes
        self.interval = interval
        self._sleep = sleep
        self._lock = threading.Lock()
        self._released = 0
        self._thread: threading.Thread | None = None
        #: Trims done.
        self.trims = 0

    @property
    def available(self) -> bool:
        return self._trim is not None

    def released(self, size: int) -> None:
        """``size`` bytes were released (an estimate): trim soon if that makes enough."""
        if self._trim is None or size <= 0:
            return
        with self._lock:
            self._released += size
            if self._thread is not None or self._released < self.min_bytes:
                return
            self._thread = threading.Thread(
                target=self._run, name="chatcli-malloc-trim", daemon=True
            )
            thread = self._thread
        thread.start()

    def wait(self) -> None:
        """Until the trims asked for are done (tests, benchmarks)."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        trim = self._trim
        assert trim is not None  # only started with one
        while True:
            self._sleep(self.interval)  # what is released with the first is freed by then
            with self._lock:
                if self._released < self.min_bytes:
                    self._thread = None
                    return
                self._released = 0
            started = time.perf_counter()
            trim(0)
            self.trims += 1
            logger.debug("malloc_trim took %.1f ms", (time.perf_counter() - started) * 1e3)


#: The process's trimmer.
TRIMMER = Trimmer(_libc_function("malloc_trim"))


def give_back(size: int) -> None:
    """Say that ``size`` bytes of state were released: the C allocator is asked to return
    its free memory to the system soon, if that adds up to enough."""
    TRIMMER.released(size)
