"""A policy or ``.env`` file's bytes, read within bounds, and decoded as UTF-8.

A file is read only if it is a regular file of at most :data:`~.limits.MAX_FILE_BYTES`:
``/dev/zero``, a FIFO or a file that grows while it is read can neither hang a load nor
fill the memory, and an error names the file and the problem, never its content.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from middleware.errors import PolicyError
from middleware.policy.limits import FILE_SIZE, MAX_FILE_BYTES


def read_bounded(path: Path, what: str) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_FILE_BYTES`. Anything else
    (``/dev/zero``, a FIFO, a folder) is refused before it is opened, checked again once
    open, and at most one byte past the bound is ever read, so neither an endless file nor
    one that grows after the check can hang the load or fill the memory."""
    source = str(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        info = os.stat(path)
        _check_regular(info, source, what)
        descriptor = os.open(path, flags | getattr(os, "O_BINARY", 0))
    except PolicyError:
        raise
    except OSError as exc:
        raise PolicyError(f"cannot read {what}: {exc.strerror or exc}", source=source) from None
    except ValueError:  # a NUL in the path
        raise PolicyError(
            f"cannot read {what}: the path holds a NUL character", source=source
        ) from None
    try:
        _check_regular(os.fstat(descriptor), source, what)
        chunks: list[bytes] = []
        left = MAX_FILE_BYTES + 1
        while left > 0:
            chunk = os.read(descriptor, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise PolicyError(f"cannot read {what}: {exc.strerror or exc}", source=source) from None
    finally:
        os.close(descriptor)
    if left <= 0:
        raise _too_big(source, what)
    return b"".join(chunks)


def _check_regular(info: os.stat_result, source: str, what: str) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = (
            "a folder" if stat.S_ISDIR(info.st_mode)
            else "a FIFO" if stat.S_ISFIFO(info.st_mode)
            else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
            else "a socket or other special file"
        )  # fmt: skip
        raise PolicyError(
            f"cannot read {what}: not a regular file ({kind}); name a YAML text file",
            source=source,
        )
    if info.st_size > MAX_FILE_BYTES:
        raise _too_big(source, what)


def _too_big(source: str, what: str) -> PolicyError:
    return PolicyError(f"the {what} file is larger than {FILE_SIZE}, the limit", source=source)


def decode_utf8(data: bytes, source: str) -> str:
    """``data`` as text, or an error locating the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        column = len(data[start : exc.start].decode("utf-8", "replace")) + 1
        raise PolicyError(
            "not UTF-8 text (a byte sequence UTF-8 cannot decode); save the file as UTF-8",
            source=source,
            line=line,
            column=column,
        ) from None
