"""The ledger written down: one JSON line per billed answer, appended to ``ledger.file``
by a thread of its own (a slow or hung disk never holds an answer up), rotated past
``ledger.rotate_bytes`` (:mod:`.archive` keeps the sums of the parts rotated out), and read
back a line at a time, never whole, when a proxy or a wrapped client starts and by
``chatcli-mw ledger --file``.

Lines are appended with ``O_APPEND`` in one ``write`` each (a few hundred bytes), holding
the file's lock shared; a rotation holds it exclusively (:mod:`.locks`), so processes on
one machine may share a file. On a network filesystem, give each process its own file.
Reading the file back is :mod:`.lines`'s.

A line is whole or absent: a full disk cuts a write short, and the part written, left at
the end of the file, made the next line appended part of it (of ten answers written once
the disk had room again, nine were read back). A write cut short is taken back, and a line
appended to a file that does not end one (another process's cut short, or killed) starts
on a line of its own.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import re
import threading
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from middleware.ledger.locks import locked, open_lock

logger = logging.getLogger(__name__)

#: Lines waiting to be written, at most: past it (the disk is stalled) new lines are
#: dropped and counted, and memory stays bounded.
MAX_WAITING = 10_000
#: Seconds :meth:`Journal.close` waits for the lines still waiting.
CLOSE_SECONDS = 5.0
_STOP = object()
#: Read too: whether the file ends a line is read before appending one.
_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


class Journal:
    """Appends records to ``path`` from a background thread; past ``rotate_bytes`` (none:
    never) calls ``rotate(path)`` while it holds the file's lock exclusively (by default
    :func:`rename_to_next_part`; the ledger's own also sums the parts: :mod:`.archive`)."""

    def __init__(
        self,
        path: str | Path,
        rotate_bytes: int | None = None,
        rotate: Callable[[Path], None] | None = None,
    ) -> None:
        self.path = Path(path).expanduser()
        self.rotate_bytes = rotate_bytes
        self.rotate = rotate
        self.dropped = 0
        self.failed = 0
        self._waiting: queue.Queue[object] = queue.Queue(MAX_WAITING)
        #: The file open for appending (the writing thread's alone).
        self._descriptor: int | None = None
        self._thread = threading.Thread(target=self._run, name="chatcli-ledger", daemon=True)
        self._thread.start()
        # A client nobody closes still has its last lines written when the program ends.
        atexit.register(_close, weakref.ref(self))

    def write(self, record: Mapping[str, Any]) -> None:
        """Queue ``record`` for the file; dropped (and counted) when too many wait."""
        try:
            line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except ValueError as exc:  # NaN or an infinity: a line no JSON reader takes
            self.failed += 1
            logger.error("a ledger line was not written to %s: %s", self.path, exc)
            return
        try:
            # Names are valid Unicode (.checks.name); should one slip through, a "?", never
            # a line that is not UTF-8.
            self._waiting.put_nowait((line + "\n").encode("utf-8", "replace"))
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                logger.error(
                    "the ledger file %s is not keeping up: %d lines dropped",
                    self.path,
                    self.dropped,
                )

    def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """Write what waits (for up to ``timeout`` seconds) and stop."""
        if not self._thread.is_alive():
            return
        try:
            self._waiting.put(_STOP, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

    def _run(self) -> None:
        lock: int | None = None
        while True:
            line = self._waiting.get()
            if line is _STOP:
                break
            assert isinstance(line, bytes)
            try:
                if lock is None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    lock = open_lock(self.path)
                with locked(lock, shared=True):
                    size = _append(self._current(), line)
                if self.rotate_bytes is not None and size >= self.rotate_bytes:
                    with locked(lock, shared=False):
                        self._rotate()
            except OSError as exc:
                self.failed += 1
                if self.failed == 1 or self.failed % 1000 == 0:
                    logger.error(
                        "cannot write the ledger file %s (%d lines lost): %s",
                        self.path,
                        self.failed,
                        exc,
                    )
                self._close_file()  # opened again for the next line
        self._close_file()
        if lock is not None:
            os.close(lock)

    def _current(self) -> int:
        """A descriptor of the file at :attr:`path` now: the one open unless the file
        was rotated since it was opened (by this process or another)."""
        if self._descriptor is not None:
            try:
                there, mine = os.stat(self.path), os.fstat(self._descriptor)
                if (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino):
                    return self._descriptor
            except FileNotFoundError:
                pass
            self._close_file()
        self._descriptor = os.open(self.path, _FLAGS, 0o600)
        return self._descriptor

    def _close_file(self) -> None:
        if self._descriptor is not None:
            descriptor, self._descriptor = self._descriptor, None
            os.close(descriptor)

    def _rotate(self) -> None:
        """Rotate the file (its lock held exclusively), unless another process sharing
        it just did."""
        try:
            if os.stat(self.path).st_size < (self.rotate_bytes or 0):
                return
        except FileNotFoundError:
            return
        try:
            (self.rotate or rename_to_next_part)(self.path)
        except Exception:  # the file grows on; a part not summed is read at start
            logger.exception("cannot rotate the ledger file %s", self.path)


def _append(descriptor: int, line: bytes) -> int:
    """Append ``line`` to the file open as ``descriptor`` whole, or not at all; the
    file's size after it.

    :raises OSError: it could not be written whole (what was, is taken back unless
        another process appended after it meanwhile).
    """
    size = os.fstat(descriptor).st_size
    if size and _byte_at(descriptor, size - 1) != b"\n":
        line = b"\n" + line  # end the line another writer left unfinished
    written = os.write(descriptor, line)
    if written < len(line):
        end = os.lseek(descriptor, 0, os.SEEK_CUR)  # where this write ended (O_APPEND)
        if os.fstat(descriptor).st_size == end:
            os.ftruncate(descriptor, end - written)
        raise OSError(f"only {written} of a line's {len(line)} bytes were written (disk full?)")
    return os.fstat(descriptor).st_size


def _byte_at(descriptor: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(descriptor, 1, offset)
    os.lseek(descriptor, offset, os.SEEK_SET)  # Windows (appending still goes to the end)
    return os.read(descriptor, 1)


def _close(journal: weakref.ref[Journal]) -> None:
    alive = journal()
    if alive is not None:
        alive.close()


def part(path: Path, number: int) -> Path:
    """The ``number``-th part rotated out of the ledger file at ``path`` (``PATH.1`` the
    oldest)."""
    return path.with_name(f"{path.name}.{number}")


def rename_to_next_part(path: Path, after: int = 0) -> None:
    """Rename the ledger file at ``path`` to the part after the last there is, and after
    part ``after`` (one that was removed)."""
    numbers = [number for number, _ in parts(path)]
    os.rename(path, part(path, max([after, *numbers]) + 1))


def parts(path: Path) -> list[tuple[int, Path]]:
    """The parts rotated out of the ledger file at ``path``, the oldest first."""
    pattern = re.compile(re.escape(path.name) + r"\.([0-9]{1,18})")
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    found = ((pattern.fullmatch(name), name) for name in names)
    return sorted((int(m.group(1)), path.with_name(name)) for m, name in found if m)
