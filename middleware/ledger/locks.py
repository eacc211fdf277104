"""The ledger file's lock (``PATH.lock``): held shared to append a line or to read the
file, exclusively to rotate it, so processes on one machine may share a file and none
writes to a part once it is summed. On Windows there are no advisory locks: give each
process its own ledger file."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

if sys.platform != "win32":
    import fcntl

    def _flock(lock: int, shared: bool | None) -> None:
        """Take the lock shared or exclusive, or (``None``) release it."""
        fcntl.flock(
            lock, fcntl.LOCK_UN if shared is None else (fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        )

else:  # Windows: no advisory locks, so give each process its own ledger file

    def _flock(lock: int, shared: bool | None) -> None:
        pass


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """The ledger file at ``path`` held still (its lock shared: no rotation) while it is
    read; unlocked if the lock cannot be made (a folder this process may not write)."""
    try:
        lock = open_lock(path)
    except OSError:
        yield
        return
    try:
        with locked(lock, shared=True):
            yield
    finally:
        os.close(lock)


def open_lock(path: Path) -> int:
    """A descriptor of the lock beside the ledger file at ``path`` (made if need be)."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    return os.open(path.with_name(path.name + ".lock"), flags, 0o600)


@contextmanager
def locked(lock: int, *, shared: bool) -> Iterator[None]:
    """``lock`` held shared or exclusively for the block."""
    _flock(lock, shared)
    try:
        yield
    finally:
        _flock(lock, None)
