"""Run third-party plugin code under a time limit, on threads that may be left behind.

A Python thread cannot be stopped: a hook implementation that blocks forever keeps its
thread forever. So the caller waits at most the time limit and goes on without the answer,
and the call finishes (or not) on a daemon thread of its own, which never holds the host
program up at exit. While a call of one implementation is still running past its limit,
that implementation is skipped: a hung plugin costs one thread, not one per request.

Threads are reused (a hook called once per tool result would otherwise start hundreds per
request) and leave after a while idle. A call runs in a copy of the caller's
:mod:`contextvars` context, as it would inline. Everything the call raises, ``SystemExit``
and ``KeyboardInterrupt`` included, is its outcome: a real Ctrl-C is raised in the main
thread, where the caller waits, never in a worker.
"""

from __future__ import annotations

import contextvars
import itertools
import os
import queue
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

#: Seconds an idle worker thread waits for another call before it ends.
IDLE_SECONDS = 30.0


@dataclass(frozen=True)
class Outcome:
    """How one limited call ended."""

    #: What the call returned (``None`` unless it finished without raising).
    value: Any = None
    #: What the call raised, if it finished by raising.
    error: BaseException | None = None
    #: ``False``: the time limit passed first (``value`` and ``error`` are unknown).
    finished: bool = True
    #: The call was not made: an earlier call of the same key is still running late.
    skipped: bool = False


class _Task:
    def __init__(self, call: Callable[[], Any], key: Hashable, limits: TimeLimits) -> None:
        self.call = call
        self.key = key
        self.limits = limits
        self.context = contextvars.copy_context()
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        #: Set (under the limits' lock) when the caller stopped waiting for it.
        self.late = False

    def run(self) -> None:
        try:
            self.value = self.context.run(self.call)
        except BaseException as exc:  # the plugin's outcome, whatever it is
            self.error = exc
        self.limits._finished(self)


class _Worker(threading.Thread):
    """A daemon thread that runs tasks handed to it, then offers itself to the pool."""

    _numbers = itertools.count(1)

    def __init__(self, pool: _Pool, first: _Task) -> None:
        super().__init__(name=f"chatcli-plugin-{next(self._numbers)}", daemon=True)
        self.pool = pool
        self.first: _Task | None = first
        self.inbox: queue.SimpleQueue[_Task] = queue.SimpleQueue()

    def run(self) -> None:
        task = self.first
        self.first = None
        while task is not None:
            task.run()
            task = self.pool._next(self)


class _Pool:
    """Daemon worker threads, reused: a task goes to an idle worker, or to a new one (never
    into a queue behind a task that may never end)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        #: How many times this process is a forked child (see :meth:`after_fork`).
        self.forks = 0

    def submit(self, task: _Task) -> None:
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            _Worker(self, task).start()
        else:
            worker.inbox.put(task)

    def _next(self, worker: _Worker) -> _Task | None:
        """The worker's next task, or ``None`` when it has idled long enough to leave."""
        with self._lock:
            self._idle.append(worker)
        try:
            return worker.inbox.get(timeout=IDLE_SECONDS)
        except queue.Empty:
            with self._lock:
                if worker in self._idle:
                    self._idle.remove(worker)
                    return None
            return worker.inbox.get()  # taken from the idle list: its task is on the way

    def after_fork(self) -> None:
        """In a forked child, which has none of the parent's threads: forget the idle
        workers (a task handed to one would never run) and, through :attr:`forks`, tell
        every :class:`TimeLimits` to forget the calls running late."""
        self._lock = threading.Lock()
        self._idle = []
        self.forks += 1


_POOL = _Pool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL.after_fork)


class TimeLimits:
    """Runs calls with a time limit and remembers, per key (a plugin and its hook), the
    calls still running past theirs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._late: dict[Hashable, int] = {}
        self._forks = _POOL.forks

    def run(self, key: Hashable, call: Callable[[], Any], limit: float | None) -> Outcome:
        """Call ``call`` on a worker thread and wait at most ``limit`` seconds (``None``:
        until it ends). Never raises what ``call`` raises: that is in the outcome."""
        if self._forks != _POOL.forks:  # in a forked child: the late calls stayed behind
            self._lock, self._late, self._forks = threading.Lock(), {}, _POOL.forks
        with self._lock:
            if self._late.get(key):
                return Outcome(finished=False, skipped=True)
        task = _Task(call, key, self)
        try:
            _POOL.submit(task)
        except RuntimeError as exc:  # no thread can start (resources, interpreter exit)
            return Outcome(error=RuntimeError(f"no thread could run it: {exc}"))
        if not task.done.wait(limit):
            with self._lock:
                if not task.done.is_set():
                    task.late = True
                    self._late[key] = self._late.get(key, 0) + 1
                    return Outcome(finished=False)
        return Outcome(task.value, task.error)

    def _finished(self, task: _Task) -> None:
        with self._lock:
            task.done.set()
            if task.late:
                left = self._late[task.key] - 1
                if left:
                    self._late[task.key] = left
                else:
                    del self._late[task.key]
