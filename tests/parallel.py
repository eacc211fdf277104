"""How the suite shares the machine (tests/conftest.py's hooks).

The tests that time a real wait (a soak, idle connections, open-file limits, a hung store)
carry ``xdist_group("timing")``: ``--dist loadgroup`` runs them one after the other on one
worker. That worker mostly waits, so ``-n auto`` starts one worker more than there are
cores; and so that the timing tests still have a core whenever they run, the worker that
runs them gives the other workers a lower priority (``nice``) as its first one starts: their
work fills its waits, never its measured times.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

#: The xdist group of the tests that time a real wait.
TIMING = "timing"
#: The nice value the other workers get while the timing tests may run (of 19: they
#: get about a tenth of a core that the timing worker wants, and all of one it does not).
YIELDING = 10

logger = logging.getLogger(__name__)


def cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def auto_workers() -> int | None:
    """``-n auto``: a worker per core and one for the timing group; ``None`` leaves it to
    pytest-xdist (``PYTEST_XDIST_AUTO_NUM_WORKERS`` set)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return cores() + 1


def other_workers() -> list[int]:
    """The process ids of the other workers of this run: the controller's other children
    (Linux's /proc; elsewhere none are found)."""
    controller, me = os.getppid(), os.getpid()
    found = []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process has ended
            continue
        pid = int(entry.parent.name)
        if int(fields[1]) == controller and pid != me:
            found.append(pid)
    return found


@functools.cache  # once per worker
def give_way_to_timing() -> None:
    """In a worker of pytest-xdist: lower the other workers' priority (a process may always
    lower its own user's)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:  # -n 0: no other workers to find
        return
    for pid in other_workers():
        try:
            now = os.getpriority(os.PRIO_PROCESS, pid)
            os.setpriority(os.PRIO_PROCESS, pid, max(now, YIELDING))
        except OSError as exc:  # ended meanwhile, or not ours to change
            logger.info("worker %d keeps its priority: %s", pid, exc)
