"""The ledger written down: one JSON line per billed answer, appended to ``ledger.file``
by a thread of its own (a slow or hung disk never holds an answer up), read back when a
proxy or a wrapped client starts, and by ``chatcli-mw ledger --file``.

Lines are appended with ``O_APPEND`` in one ``write`` each (a few hundred bytes), so
processes on one machine may share a file; on a network filesystem, give each its own.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: Lines waiting to be written, at most: past it (the disk is stalled) new lines are
#: dropped and counted, and memory stays bounded.
MAX_WAITING = 10_000
#: Seconds :meth:`Journal.close` waits for the lines still waiting.
CLOSE_SECONDS = 5.0
_STOP = object()


class Journal:
    """Appends records to ``path`` from a background thread."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.dropped = 0
        self.failed = 0
        self._waiting: queue.Queue[object] = queue.Queue(MAX_WAITING)
        self._thread = threading.Thread(target=self._run, name="chatcli-ledger", daemon=True)
        self._thread.start()
        # A client nobody closes still has its last lines written when the program ends.
        atexit.register(_close, weakref.ref(self))

    def write(self, record: Mapping[str, Any]) -> None:
        """Queue ``record`` for the file; dropped (and counted) when too many wait."""
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            self._waiting.put_nowait(line)
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                logger.error("the ledger file %s is not keeping up: %d lines dropped",
                             self.path, self.dropped)  # fmt: skip

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
        descriptor: int | None = None
        while True:
            line = self._waiting.get()
            if line is _STOP:
                break
            assert isinstance(line, str)
            try:
                if descriptor is None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
                    descriptor = os.open(self.path, flags, 0o600)
                os.write(descriptor, line.encode("utf-8", "surrogatepass"))
            except OSError as exc:
                self.failed += 1
                if self.failed == 1 or self.failed % 1000 == 0:
                    logger.error("cannot write the ledger file %s (%d lines lost): %s",
                                 self.path, self.failed, exc)  # fmt: skip
                if descriptor is not None:
                    os.close(descriptor)
                    descriptor = None  # opened again for the next line
        if descriptor is not None:
            os.close(descriptor)


def _close(journal: weakref.ref[Journal]) -> None:
    alive = journal()
    if alive is not None:
        alive.close()


@dataclass
class Reading:
    """The records of a ledger file, and how many of its lines were not records."""

    records: list[dict[str, Any]]
    skipped: int = 0


def read_journal(path: str | Path) -> Reading:
    """Every record of the file at ``path`` (none if it does not exist); a line that is
    not one (cut short by a crash, edited by hand) is skipped and counted."""
    reading = Reading([])
    try:
        with Path(path).expanduser().open(encoding="utf-8", errors="surrogateescape") as file:
            for line in file:
                record = _record(line)
                if record is None:
                    reading.skipped += line.strip() != ""
                else:
                    reading.records.append(record)
    except FileNotFoundError:
        pass
    return reading


def _record(line: str) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return (
        record
        if isinstance(record, dict) and isinstance(record.get("time"), (int, float))
        else None
    )
