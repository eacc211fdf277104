"""The files of a session's folder read back, within bounds.

What a session's folder holds (a reading of a result's text, a spilled result read back
to summarise it, the session's record, the folder's marker) may have been written by
anyone who can write there: the agent itself can, since its tools read the spilled files
in that folder. Each is read through one descriptor opened without following a link and
without blocking (a FIFO planted there waits for no writer), checked with ``fstat`` (a
regular file, private where it must be, no larger than its cap) and read no further than
its cap, so a 200 MB file costs a ``stat``, not 200 MB. What fails is refused: never used,
never fed to the model, and said in the log once per interval for each kind of file.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from middleware.logs import IntervalLog
from middleware.spill.layout import SpillError, is_result_name, verified_text

logger = logging.getLogger(__name__)

#: Seconds between two log lines about the refused files of one kind.
LOG_INTERVAL_SECONDS = 60.0
_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class Refused(SpillError):
    """A file of a session's folder that is not used, and why."""


def read_bounded(path: Path, max_bytes: int | None, *, private: bool) -> bytes | None:
    """The bytes of the file at ``path`` (``None``: there is none), ``max_bytes`` at most
    (``None``: whatever its size, for a file only served to a client).

    :raises Refused: a link, not a regular file (a FIFO, a device, a folder), with
        ``private`` not a private file of this user's, larger than ``max_bytes``, or a
        file that cannot be read.
    """
    try:
        fd = os.open(path, _FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Refused(f"{path} cannot be opened ({exc}): a symbolic link, or unreadable") from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"{path} is {kind_of(info.st_mode)}, not a regular file")
        if private and not private_file(info):
            raise Refused(
                f"{path} is not a private regular file of this user's "
                f"(mode {stat.S_IMODE(info.st_mode):o}, owner {info.st_uid})"
            )
        if max_bytes is not None and info.st_size > max_bytes:
            size, most = f"{info.st_size:,}", f"{max_bytes:,}"
            raise Refused(f"{path} holds {size} bytes, more than the {most} it may hold")
        try:
            data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
        except OSError as exc:
            raise Refused(f"{path} cannot be read: {exc}") from exc
    if max_bytes is not None and len(data) > max_bytes:  # grew while it was read
        raise Refused(f"{path} grew past its {max_bytes:,} bytes")
    return data


def read_result(path: Path, max_bytes: int | None = None, *, said: bool = False) -> str | None:
    """The content of a result file a workspace saved at ``path``, or ``None`` for
    anything else (missing; refused: a link, not a regular file, over ``max_bytes``, a
    content that does not match the digest in its name). With ``said``, a refusal is
    said in the log (a result read back to work on; recall, which answers that there is
    no such result, says nothing more)."""
    if not is_result_name(path.name):
        return None
    try:
        data = read_bounded(path, max_bytes, private=False)
        text = None if data is None else verified_text(path.name, data)
        if data is not None and text is None:
            raise Refused(f"{path} does not hold what its name's digest says")
    except Refused as exc:
        if said:
            say_refused("result", str(exc))
        return None
    return text


def private_file(info: os.stat_result) -> bool:
    """A regular file (not a link) only this user can read and write."""
    return (
        stat.S_ISREG(info.st_mode)
        and stat.S_IMODE(info.st_mode) == 0o600
        and (not hasattr(os, "getuid") or info.st_uid == os.getuid())
    )


def unlike(path: Path, wanted: Callable[[int], bool]) -> str | None:
    """What is at ``path`` (``a FIFO``, ``a folder``...) if it is not what ``wanted`` says
    of its mode, else ``None`` (it is, or nothing is there yet). Found by ``stat``, links
    followed: nothing is opened, so a FIFO, which waits for a writer, never blocks it.

    :raises OSError: what is there cannot be told.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    return None if wanted(mode) else kind_of(mode)


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, as an error message says it (``a FIFO``)."""
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
        (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a link"),
    ):  # fmt: skip
        if test(mode):
            return name
    return "no regular file"


class Refusals:
    """The files refused, counted by kind (``reading``, ``result``, ``record``, ``marker``),
    each kind said in the log the first time, then at most once per interval with how many
    came meanwhile: a folder someone keeps filling never floods the log."""

    def __init__(
        self, interval: float = LOG_INTERVAL_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        #: Files refused so far, by kind.
        self.counts: dict[str, int] = {}
        self._log = IntervalLog(logger, interval, clock)
        self._lock = threading.Lock()

    def __call__(self, kind: str, why: str) -> None:
        """Count one ``kind`` of file refused for ``why``, and say it if it is time."""
        with self._lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
        self._log(logging.WARNING, kind, "a %s file of a session's folder was ignored: %s",
                  kind, why)  # fmt: skip


#: The refusals of this process's session folders.
refused = Refusals()


def say_refused(kind: str, why: str) -> None:
    """Count one ``kind`` of file refused for ``why`` in :data:`refused` (said in the log
    once per interval)."""
    refused(kind, why)
