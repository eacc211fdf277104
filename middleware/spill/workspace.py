"""The per-session spill workspace: where the full text of a cut result is kept.

Files are named from a sanitised id plus a hash of the content, written once and
atomically, and reused when present with the same content, so the same result always
yields the same path and therefore the same preview bytes (prompt-cache stability).
Nothing is ever written outside the workspace or through a symbolic link.

A saved file is visible at once (written to a temporary name, then renamed) but synced to
disk only by :meth:`SpillWorkspace.sync`, which a pipeline calls before it returns the
previews that name the files: the files of one request are synced together
(:mod:`middleware.spill.syncing`).

Several pipelines may share a workspace (the same session id, in one process or several):
each holds a lease in it while open, and the folder is removed when the last one closes,
only if a workspace created it and none of its users asked to keep it. A folder the
workspace did not create, or refused to use, is never removed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from middleware.cache.kept import MAX_READING_BYTES
from middleware.spill.bounded import Refused, private_file, read_bounded, read_result, say_refused
from middleware.spill.layout import (
    MARKER,
    MAX_ID_CHARS,
    READINGS,
    RECORD,
    RESULTS,
    SpillError,
    is_reading_name,
    session_folder_name,
    spill_file_name,
)
from middleware.spill.leases import LEASES, lease_name, leases_held
from middleware.spill.private_files import (
    lock_file,
    make_private_dir,
    replace_private,
    write_private,
)
from middleware.spill.syncing import PendingSyncs

__all__ = [
    "MARKER",
    "MAX_ID_CHARS",
    "SpillError",
    "SpillWorkspace",
    "session_folder_name",
    "spill_file_name",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Bytes of a spilled result read back to work on it (a summary of it), at most: twice
#: the proxy's default body limit (proxy.max_body_bytes, 32 MiB), which no result the
#: proxy spilled can be longer than; the results of the trajectories of ../shared/data
#: take 78 KB at most.
#: A larger one is refused (``chatcli-mw recall`` and ``/recall``, which only serve it,
#: read it whole).
MAX_RESULT_BYTES = 64 << 20
#: Bytes of the folder's marker (``keep`` or ``remove``).
MAX_MARKER_BYTES = 64

#: The file every process locks while it reads, merges and writes a session's record.
RECORD_LOCK = ".session.lock"
#: How long a process waits for another to finish writing the record before it gives up
#: (the record is then not written this time: see :meth:`SpillWorkspace.record_lock`):
#: for one record, or for all of those written together as the proxy stops or a session
#: ends (a process stopped while it holds their locks delays that by this much in all).
RECORD_LOCK_SECONDS = 5.0
_FOR_WHOM = (
    "for a record, or for all those written as the proxy stops or a session ends; a process "
    "stopped while writing one?"
)


class SpillWorkspace:
    """``<root>/chatcli-agent-<session>/tool-results/``: folders 0700, files 0600.

    ``root`` defaults to the system temporary folder. The folders are created on the first
    save. :meth:`close` ends this workspace's use of the folder (see the module docstring
    for when that removes it); a closed workspace refuses to save.
    """

    def __init__(self, session_id: str, root: str | Path | None = None, *, keep: bool = False):
        base = Path(root) if root is not None else Path(tempfile.gettempdir())
        self.session_dir = base / session_folder_name(session_id)
        self.results_dir = self.session_dir / RESULTS
        self.keep = keep
        self._lease: Path | None = None
        self._closed = False
        self._lock = threading.Lock()
        #: Files this workspace wrote or checked: path -> (inode, size, mtime), so a file
        #: that did not change since is reused without reading it again.
        self._known: dict[Path, tuple[int, int, int]] = {}
        #: Whether this workspace made (or checked) the folder of readings.
        self._readings_ready = False
        #: Files written and not synced yet, and the syncs under way (:meth:`sync`).
        self._syncs = PendingSyncs(self.results_dir)

    @property
    def local(self) -> SpillWorkspace:
        """The workspace on this machine keeping the session's record and readings beside
        its files: this one."""
        return self

    def hold(self, seconds: float) -> None:
        """Nothing to hold: only an object store's workspace keeps holds for ``gc``."""

    def location(self, key: str, content: str, *, suffix: str = ".txt") -> str:
        """Where :meth:`save` would store ``content`` (nothing is written)."""
        return str(self.results_dir / spill_file_name(key, content, suffix))

    def save(self, key: str, content: str, *, suffix: str = ".txt") -> str:
        """Store ``content`` and return its path; a file already holding it is reused."""
        name = spill_file_name(key, content, suffix)
        data = content.encode("utf-8", "surrogatepass")
        target = self.results_dir / name
        try:
            self._prepare()
            if self._holds(target, data):
                return str(target)
            fd, tmp = tempfile.mkstemp(dir=self.results_dir, prefix=".partial-", suffix=suffix)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                # rename() replaces a planted symlink itself; it never writes through it.
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            self._remember(target)
            self._syncs.add(target)
        except OSError as exc:
            if isinstance(exc, SpillError):
                raise
            raise SpillError(f"cannot save spilled output to {target}: {exc}") from exc
        return str(target)

    def sync(self) -> None:
        """Sync to disk every file saved so far (and the renames that named them): when
        this returns, no crash can take a file a preview names. The files waiting are
        synced in parallel; a sync another request started is waited for too.

        :raises SpillError: the file system refused to sync one.
        """
        self._syncs.sync()

    def load(self, location: str) -> str | None:
        """The content of a file this workspace saved, or ``None`` for anything else (a
        path outside ``tool-results/``, a link, a missing file, one whose content does not
        match the digest in its name)."""
        path = Path(location)
        if path.parent != self.results_dir:
            return None
        return read_result(path, MAX_RESULT_BYTES, said=True)

    def load_reading(self, name: str, decode: Callable[[str], T | None]) -> T | None:
        """The reading kept under ``name`` (:mod:`middleware.cache.kept`) as ``decode``
        reads it, or ``None``: missing, or refused (not a private regular file of this
        user's, over :data:`MAX_READING_BYTES`, not UTF-8, not what ``decode`` takes:
        logged)."""
        if not is_reading_name(name):
            return None
        path = self.session_dir / READINGS / f"{name}.json"
        try:
            data = read_bounded(path, MAX_READING_BYTES, private=True)
            if data is None:
                return None
            value = decode(data.decode("utf-8"))
        except (Refused, UnicodeDecodeError) as exc:
            say_refused("reading", str(exc) if isinstance(exc, Refused) else f"{path}: {exc}")
            return None
        if value is None:
            say_refused("reading", f"{path} is not a reading of its text")
        return value

    def save_reading(self, name: str, content: str) -> None:
        """Keep ``content`` under ``name``, written whole (a reader never sees part of
        it). Readings can always be worked out again: a failure is logged, not raised,
        and nothing is synced to disk."""
        if not is_reading_name(name):
            raise ValueError(f"not a reading name: {name!r}")
        folder = self.session_dir / READINGS
        try:
            self._prepare()
            if not self._readings_ready:
                make_private_dir(folder)
                self._readings_ready = True
            replace_private(folder, f"{name}.json", content)
        except OSError as exc:  # a SpillError too: a closed or unsafe workspace
            logger.info("reading %s not kept in %s: %s", name, folder, exc)

    @property
    def record_location(self) -> str:
        """Where the session's record is (:mod:`middleware.session.cold_cache`)."""
        return str(self.session_dir / RECORD)

    def record_stamp(self) -> tuple[int, int, int] | None:
        """What changes whenever the record is written (a new file is renamed over it
        each time: its inode, size and time), or ``None``: there is none. One ``lstat``,
        cheap enough to ask before every request."""
        try:
            info = os.lstat(self.session_dir / RECORD)
        except OSError:
            return None
        return (info.st_ino, info.st_size, info.st_mtime_ns)

    def load_record(self, max_bytes: int) -> str | None:
        """The session's record, or ``None``: there is none. A record of more than
        ``max_bytes`` is not read at all (its size is known before reading).

        :raises SpillError: it cannot be read, is not a private regular file of this
            user's, holds more than ``max_bytes`` or is not UTF-8.
        """
        path = self.session_dir / RECORD
        try:
            data = read_bounded(path, max_bytes, private=True)
        except Refused as exc:
            raise SpillError(f"refusing to read the record: {exc}; remove it") from exc
        if data is None:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SpillError(f"cannot read {path}: it is not UTF-8 ({exc}); remove it") from exc

    @contextlib.contextmanager
    def record_lock(self, *, create: bool = True, until: float | None = None) -> Iterator[bool]:
        """Held while the record is read, merged and written: every process that writes
        it locks ``.session.lock`` beside it (``flock``; none on Windows), so two of them
        never write at once and neither loses what the other wrote. Gives whether the
        record may be written: with ``create=False``, only in a session folder that
        exists already (even under ``spill.keep``: a session that kept nothing gets no
        folder).

        :param until: when to give up waiting (``time.monotonic()``; the lock is tried
            once even past it), :data:`RECORD_LOCK_SECONDS` from now unless given.
        :raises OSError: the lock could not be taken by then (a process holds it that
            does not let go), or the folder is unusable (a :class:`SpillError` for a
            closed or unsafe workspace).
        """
        if not (create or self.session_dir.is_dir()):
            yield False
            return
        self._prepare()
        path = self.session_dir / RECORD_LOCK
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            until = time.monotonic() + RECORD_LOCK_SECONDS if until is None else until
            lock_file(fd, path, until, f"{RECORD_LOCK_SECONDS:g} s {_FOR_WHOM}")
            yield True
        finally:
            os.close(fd)  # releases the lock

    def save_record(self, content: str) -> None:
        """Keep ``content`` as the session's record, written whole (a reader never sees
        part of it), not synced; under :meth:`record_lock`.

        :raises OSError: it could not be written (a :class:`SpillError` for a closed
            or unsafe workspace).
        """
        self._prepare()
        replace_private(self.session_dir, RECORD, content)

    def close(self) -> None:
        """End this workspace's use of the folder; safe to call more than once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            lease, self._lease = self._lease, None
            if lease is None:
                return  # never used the folder (or was refused): nothing of ours there
            lease.unlink(missing_ok=True)
            if leases_held(self.session_dir):
                return
            try:
                found = read_bounded(self.session_dir / MARKER, MAX_MARKER_BYTES, private=True)
            except Refused as exc:
                say_refused("marker", str(exc))
                return  # not a marker a workspace wrote
            if found is None:
                return  # not a folder a workspace created
            marker = found.decode("utf-8", "replace").strip()
            if marker == "keep":
                logger.info("kept spill workspace %s", self.session_dir)
                return
            shutil.rmtree(self.session_dir, ignore_errors=True)

    # -- helpers ---------------------------------------------------------------------------

    def _prepare(self) -> None:
        with self._lock:
            if self._closed:
                raise SpillError(
                    f"the spill workspace {self.session_dir} is closed (the pipeline that "
                    "owns it was closed): nothing more can be saved there"
                )
            if self._lease is not None and self._lease.exists():
                return
            self.session_dir.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            created = make_private_dir(self.session_dir)
            for folder in (self.results_dir, self.session_dir / LEASES):
                make_private_dir(folder)
            marker = self.session_dir / MARKER
            if created or (self.keep and marker.exists()):
                write_private(marker, "keep" if self.keep else "remove")
            lease = self.session_dir / LEASES / lease_name()
            write_private(lease, "")
            self._lease = lease

    def _holds(self, target: Path, data: bytes) -> bool:
        """Whether ``target`` is a private regular file of ours holding exactly ``data``."""
        try:
            info = os.lstat(target)
        except FileNotFoundError:
            return False
        if not private_file(info) or info.st_size != len(data):
            return False
        if self._known.get(target) == (info.st_ino, info.st_size, info.st_mtime_ns):
            return True
        try:
            same = read_bounded(target, len(data), private=True) == data
        except Refused:
            return False
        if same:
            self._known[target] = (info.st_ino, info.st_size, info.st_mtime_ns)
        return same

    def _remember(self, target: Path) -> None:
        info = os.lstat(target)
        self._known[target] = (info.st_ino, info.st_size, info.st_mtime_ns)
