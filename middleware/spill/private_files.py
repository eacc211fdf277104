"""The files and folders of a local session folder as only their user may have them:
folders 0700 of this user's, files 0600 written whole, never through a planted link, and
the record's lock file locked."""

from __future__ import annotations

import os
import stat
import sys
import time
import uuid
from pathlib import Path

from middleware.spill.layout import SpillError

if sys.platform != "win32":
    import fcntl


def replace_private(folder: Path, name: str, content: str) -> None:
    """Write ``content`` to ``folder/name``, private and whole (a reader never sees part
    of it), never through a planted link."""
    tmp = folder / f".partial-{uuid.uuid4().hex}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.replace(tmp, folder / name)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def make_private_dir(folder: Path) -> bool:
    """Create ``folder`` (0700), or check the one there is :func:`check_private_dir`;
    whether it was created."""
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        check_private_dir(folder)
        return False
    return True


def check_private_dir(folder: Path) -> None:
    info = os.lstat(folder)
    if stat.S_ISLNK(info.st_mode):
        raise SpillError(f"refusing to use {folder}: it is a symbolic link")
    if not stat.S_ISDIR(info.st_mode):
        raise SpillError(f"refusing to use {folder}: it is not a folder")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise SpillError(f"refusing to use {folder}: it belongs to another user")
    if info.st_mode & 0o077:
        raise SpillError(
            f"refusing to use {folder}: other users can access it (mode {info.st_mode & 0o777:o})"
        )


def lock_file(fd: int, path: Path, until: float, deadline: str) -> None:
    """Lock the file open as ``fd`` for this open file (threads of one process exclude
    each other too), waiting until ``until`` (``time.monotonic()``) at most for the one
    who holds it; ``deadline`` says in the error what that deadline was."""
    if sys.platform == "win32":
        return
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= until:
                raise SpillError(
                    f"cannot lock {path}: another process held it past the deadline ({deadline})"
                ) from None
            time.sleep(0.01)
