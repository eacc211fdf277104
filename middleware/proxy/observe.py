"""Observe mode (``proxy.mode: observe``): every request goes upstream byte for byte as it
came, and the pipeline runs beside it, off the request path, so the ledger can say what the
cleaned request would have cost, and the console what the steps would have done.

The projections run one at a time, in the order the requests came, in a thread of their
own: a session's requests are projected in order, as cleaning would have processed them.
What waits is bounded in bytes (``proxy.observe_bytes``) and in time
(``proxy.observe_seconds``): a request past either bound is simply not projected (its
answer is billed as sent), and counted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from middleware.conversations.cleaning import Cleaned
from middleware.ledger import Caller

logger = logging.getLogger(__name__)

#: What projecting a request gives: what the steps made of it, and who asked (with the
#: console's record of it).
Projected = tuple[Cleaned, Caller]


@dataclass
class Projection:
    """One request's projection, done once the pipeline ran on it or it was given up."""

    size: int
    arrived: float
    deadline: float
    #: What the steps made of it and who asked (``None``: not projected, ``outcome`` says
    #: why).
    result: Projected | None = None
    outcome: str | None = None
    _then: list[Callable[[Projection], None]] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def then(self, callback: Callable[[Projection], None]) -> None:
        """Call ``callback`` with this projection once it is done: now, if it is."""
        with self._lock:
            if self.outcome is None:
                self._then.append(callback)
                return
        callback(self)

    def finish(self, result: Projected | None, outcome: str) -> None:
        with self._lock:
            self.result, self.outcome = result, outcome
            waiting, self._then = self._then, []
        for callback in waiting:
            try:
                callback(self)
            except Exception:  # a bill that cannot be made costs that bill only
                logger.exception("could not bill an observed request's answer")


class Observer:
    """Projects requests in a thread of its own, within a bound in bytes and in time.

    :param counted: told each projection's outcome (``projected``, ``full``, ``late``,
        ``failed``), for ``/metrics``.
    """

    def __init__(self, counted: Callable[[str], None]) -> None:
        self.counted = counted
        self._waiting: deque[tuple[Projection, Callable[[], Projected]]] = deque()
        self._held = 0
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(
        self, size: int, project: Callable[[], Projected], *, seconds: float, max_bytes: int
    ) -> Projection:
        """Project a request of ``size`` bytes with ``project`` (in the observer's thread),
        unless what waits would then hold more than ``max_bytes``; its projection is given
        up if it cannot start within ``seconds`` of now."""
        now = time.monotonic()
        projection = Projection(size, now, now + seconds)
        with self._changed:
            if self._closed or self._held + size > max_bytes:
                full = True
            else:
                full = False
                self._held += size
                self._waiting.append((projection, project))
                self._start()
                self._changed.notify()
        if full:
            self._finish(projection, None, "full")
        return projection

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="chatcli-observe", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._closed:
                    self._changed.wait()
                if not self._waiting:
                    return
                projection, project = self._waiting.popleft()
            try:
                self._project(projection, project)
            finally:
                with self._changed:
                    self._held -= projection.size
                    self._changed.notify_all()

    def _project(self, projection: Projection, project: Callable[[], Projected]) -> None:
        if time.monotonic() > projection.deadline:
            self._finish(projection, None, "late")
            return
        try:
            result = project()
        except Exception:  # never the reason a request fails: it went as it came
            logger.exception("could not project an observed request")
            self._finish(projection, None, "failed")
            return
        self._finish(projection, result, "projected" if result[0].report else "untouched")

    def _finish(self, projection: Projection, result: Projected | None, outcome: str) -> None:
        self.counted(outcome)
        projection.finish(result, outcome)

    def close(self, timeout: float = 5.0) -> None:
        """Project what waits (for ``timeout`` seconds at most), then stop."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
