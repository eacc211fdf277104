"""The calls a process makes to an object store: each on threads of their own, within a
deadline (``spill.timeout_seconds``, retries included), and after a failure the store
counts as down for ``spill.retry_after_seconds``, so a store that is down costs one
timeout, not one per result, and a hung one never takes the threads that serve requests.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from middleware.spill.layout import SpillError, SpillTimeout, describe

logger = logging.getLogger(__name__)

#: Threads a root calls its store on: calls of a store that hangs hold these, never the
#: threads that serve requests.
STORE_THREADS = 8

T = TypeVar("T")


class StoreCalls:
    """The calls to the store at ``url``, and whether it counts as down now."""

    def __init__(
        self,
        url: str,
        *,
        retry_after: float,
        timeout: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.retry_after = retry_after
        self.timeout = timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._down: tuple[float, str] | None = None
        self._threads = concurrent.futures.ThreadPoolExecutor(
            STORE_THREADS, thread_name_prefix="chatcli-store"
        )

    def submit(self, call: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        """``call()`` on the store's threads, with no deadline (the holds kept in the
        background)."""
        return self._threads.submit(call)

    def within(self, call: Callable[[], T], doing: str, *, down: bool = True) -> T:
        """``call()`` on the store's threads, within ``timeout`` seconds in all; any
        failure, or the deadline missed, is a :class:`SpillError` (and, with ``down``, the
        store counts as down). A call that misses it runs on in its thread: the request
        does not wait for it."""
        try:
            future = self._threads.submit(call)
        except RuntimeError as exc:  # shut down: the process is ending
            raise SpillError(f"{doing}: the spill store is closed ({exc})") from exc
        try:
            return future.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()  # if it has not started: never run it late
            reason = TimeoutError(f"no answer within {self.timeout:g} s (spill.timeout_seconds)")
            if down:
                self._failed(doing, reason)
            raise SpillTimeout(f"{doing}: {describe(reason)}") from None
        except SpillError:
            raise
        except Exception as exc:  # any backend's error: botocore's are not OSErrors
            raise (
                self._failed(doing, exc) if down else SpillError(f"{doing}: {describe(exc)}")
            ) from exc

    def check_up(self, doing: str) -> None:
        """Raise at once while the store counts as down (``spill.retry_after_seconds``)."""
        with self._lock:
            down = self._down
        if down is None:
            return
        since = self._clock() - down[0]
        if since >= self.retry_after:
            return
        raise SpillError(
            f"{doing}: the spill store failed {since:.0f} s ago ({down[1]}); it is tried "
            f"again {self.retry_after - since:.0f} s from now (spill.retry_after_seconds)"
        )

    def up(self) -> None:
        """The store answered: it no longer counts as down."""
        with self._lock:
            if self._down is not None:
                logger.info("the spill store %s answers again", self.url)
            self._down = None

    @property
    def trouble(self) -> str | None:
        """Why the store counts as down now, or ``None`` (for health checks)."""
        with self._lock:
            down = self._down
        if down is None or self._clock() - down[0] >= self.retry_after:
            return None
        return f"failed {self._clock() - down[0]:.0f} s ago: {down[1]}"

    def _failed(self, doing: str, exc: BaseException) -> SpillError:
        """Count the store as down from now, and say what failed."""
        reason = describe(exc)
        with self._lock:
            self._down = (self._clock(), reason)
        return SpillError(f"{doing}: {reason} (check spill.url and the store's credentials)")
