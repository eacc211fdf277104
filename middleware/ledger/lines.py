"""The ledger file read back: a line at a time, never whole, nor a line past
:data:`MAX_LINE_BYTES`; and a path that is no regular file refused without blocking
(:class:`UnusableFile`)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from middleware.errors import MiddlewareError
from middleware.spill.bounded import kind_of, unlike

#: Bytes of one line read back, at most: the journal writes a few hundred (names are
#: cut short, :data:`.checks.MAX_NAME_CHARS`); a longer line is skipped unread.
MAX_LINE_BYTES = 64 * 1024
#: Reading a ledger file never waits for a writer (a FIFO there is refused at once).
_READING = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class UnusableFile(MiddlewareError, OSError):
    """A path of the ledger's that is no regular file (a FIFO, a device, a folder)."""


def check_regular(path: str | Path) -> None:
    """Refuse a ledger file that exists and is no regular file (a link to one is one); one
    that does not exist yet is made by the first answer. Nothing is opened to tell
    (``stat``: a FIFO, which waits for a writer when it is opened, never blocks it).

    :raises UnusableFile: saying which path, what it is, and what to set instead.
    """
    path = Path(path).expanduser()
    try:
        found = unlike(path, stat.S_ISREG)
    except OSError as exc:
        raise UnusableFile(f"cannot use the ledger file {path} (ledger.file): {exc}") from exc
    if found is not None:
        raise _unusable(path, found)


def _unusable(path: Path, found: str) -> UnusableFile:
    return UnusableFile(
        f"the ledger file {path} is {found}, not a regular file: set ledger.file to a file, "
        "or to a path where one can be made"
    )


class Lines:
    """The JSON objects of a file of JSON lines, read a line at a time (never the whole
    file, nor a line past ``max_bytes``); ``None`` for a line that is not one (cut short
    by a crash, edited by hand, ``NaN``), blank lines left out."""

    def __init__(self, path: str | Path, max_bytes: int = MAX_LINE_BYTES) -> None:
        self.path = Path(path).expanduser()
        self.max_bytes = max_bytes

    def __iter__(self) -> Iterator[dict[str, Any] | None]:
        """:raises UnusableFile: the path is no regular file (told without blocking)."""
        try:
            fd = os.open(self.path, _READING)
        except FileNotFoundError:
            return
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise _unusable(self.path, kind_of(mode))
        with os.fdopen(fd, "rb") as file:
            while line := file.readline(self.max_bytes + 1):
                if len(line) > self.max_bytes and not line.endswith(b"\n"):
                    while line and not line.endswith(b"\n"):  # the rest of it, unread
                        line = file.readline(self.max_bytes)
                    yield None
                elif line.strip():
                    yield _object(line)


class Reading:
    """The records of a ledger file (lines with a ``time``), as they are read, and how
    many of its lines were not records (counted once they are read)."""

    def __init__(self, path: str | Path) -> None:
        self.lines = Lines(path)
        self.skipped = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for record in self.lines:
            if record is not None and isinstance(record.get("time"), (int, float)):
                yield record
            else:
                self.skipped += 1


def read_journal(path: str | Path) -> Reading:
    """The records of the file at ``path`` (none if it does not exist), read as they are
    iterated; a line that is not one is skipped and counted."""
    return Reading(path)


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not a number JSON holds")


#: JSON as the standard says: ``NaN`` and ``Infinity`` are not numbers it holds.
_DECODER = json.JSONDecoder(parse_constant=_refuse)


def _object(line: bytes) -> dict[str, Any] | None:
    try:
        found = _DECODER.decode(line.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError):
        return None
    return found if isinstance(found, dict) else None
