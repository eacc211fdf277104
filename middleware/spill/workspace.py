"""The per-session spill workspace: where the full text of a cut result is kept.

Files are named from a sanitised id plus a hash of the content, written once and
atomically, and reused when present, so the same result always yields the same path and
therefore the same preview bytes (prompt-cache stability). Nothing is ever written outside
the workspace or through a symbolic link.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from middleware.errors import MiddlewareError
from middleware.spill.settings import SpillSettings

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_SUFFIX = re.compile(r"^\.[a-z0-9]{1,8}$")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}-[0-9a-f]{16}\.[a-z0-9]{1,8}$")
#: Longest id fragment kept in a file name; the content hash keeps names unique.
MAX_ID_CHARS = 64


class SpillError(MiddlewareError, OSError):
    """The spill workspace cannot be created or written (disk full, read-only, unsafe)."""


def safe_fragment(text: str, *, fallback: str = "result") -> str:
    """``text`` reduced to ``[A-Za-z0-9_-]``, at most :data:`MAX_ID_CHARS` long."""
    return _UNSAFE.sub("_", text.strip())[:MAX_ID_CHARS] or fallback


def spill_file_name(key: str, content: str, suffix: str = ".txt") -> str:
    """The file name a result gets: sanitised key, 16 hex digits of SHA-256, suffix."""
    if not _SUFFIX.match(suffix):
        raise ValueError(f"invalid spill file suffix {suffix!r} (expected e.g. '.txt')")
    digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{safe_fragment(key)}-{digest}{suffix}"


class SpillWorkspace:
    """``<root>/chatcli-agent-<session>/tool-results/``: folders 0700, files 0600.

    ``root`` defaults to the system temporary folder. The folders are created on the first
    save. :meth:`close` removes the session folder unless ``keep`` is set.
    """

    def __init__(self, session_id: str, root: str | Path | None = None, *, keep: bool = False):
        base = Path(root) if root is not None else Path(tempfile.gettempdir())
        self.session_dir = base / f"chatcli-agent-{safe_fragment(session_id, fallback='session')}"
        self.results_dir = self.session_dir / "tool-results"
        self.keep = keep
        self._ready = False
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, session_id: str, settings: SpillSettings) -> SpillWorkspace:
        """The workspace the policy's ``spill`` section describes."""
        return cls(session_id, settings.root, keep=settings.keep)

    def save(self, key: str, content: str, *, suffix: str = ".txt") -> str:
        """Store ``content`` and return its path; an identical earlier save is reused."""
        name = spill_file_name(key, content, suffix)
        data = content.encode("utf-8", "surrogatepass")
        target = self.results_dir / name
        try:
            self._prepare()
            if _is_regular_file_of_size(target, len(data)):
                return str(target)
            fd, tmp = tempfile.mkstemp(dir=self.results_dir, prefix=".partial-", suffix=suffix)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                # rename() replaces a planted symlink itself; it never writes through it.
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise SpillError(f"cannot save spilled output to {target}: {exc}") from exc
        return str(target)

    def load(self, location: str) -> str | None:
        """The content of a file this workspace saved, or ``None`` for anything else (a
        path outside ``tool-results/``, a link, a missing file)."""
        path = Path(location)
        if path.parent != self.results_dir or not _NAME.match(path.name):
            return None
        try:
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                return None
            return path.read_bytes().decode("utf-8", "surrogatepass")
        except (OSError, UnicodeDecodeError):
            return None

    def close(self) -> None:
        """Remove the session folder (unless ``keep``); safe to call more than once."""
        with self._lock:
            if self.keep:
                if self._ready:
                    logger.info("kept spill workspace %s", self.session_dir)
                return
            if self.session_dir.is_symlink():
                return  # never ours: _prepare refuses symlinks
            shutil.rmtree(self.session_dir, ignore_errors=True)
            self._ready = False

    def _prepare(self) -> None:
        with self._lock:
            if self._ready:
                return
            self.session_dir.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            for folder in (self.session_dir, self.results_dir):
                try:
                    folder.mkdir(mode=0o700)
                except FileExistsError:
                    _check_private_dir(folder)
            self._ready = True


def _check_private_dir(folder: Path) -> None:
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


def _is_regular_file_of_size(path: Path, size: int) -> bool:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == size
