"""Saved files synced to disk in batches: the files of one request together, in parallel,
instead of one ``fsync`` after another as they are written (a request that spilled 50
results waited for 50 of them in a row)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from middleware.spill.layout import SpillError

#: Files synced at once: a journaling file system commits concurrent syncs together.
SYNC_THREADS = 16
_syncing_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _sync_pool() -> ThreadPoolExecutor:
    global _syncing_pool  # noqa: PLW0603 - one pool for the process, made when first needed
    with _pool_lock:
        if _syncing_pool is None:
            _syncing_pool = ThreadPoolExecutor(SYNC_THREADS, thread_name_prefix="chatcli-sync")
        return _syncing_pool


def sync_file(path: Path, *, directory: bool = False) -> None:
    flags = os.O_RDONLY if directory else os.O_RDWR
    fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PendingSyncs:
    """The files written in ``folder`` and not synced yet, and the syncs under way."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._unsynced: list[Path] = []
        self._syncing: dict[Path, Future[None]] = {}

    def add(self, path: Path) -> None:
        """``path`` was written (renamed into place): :meth:`sync` syncs it."""
        with self._lock:
            self._unsynced.append(path)

    def sync(self) -> None:
        """Sync to disk every file added so far (and the renames that named them): when
        this returns, no crash can take one. The files waiting are synced in parallel; a
        sync another request started is waited for too.

        :raises SpillError: the file system refused to sync one.
        """
        with self._lock:
            todo, self._unsynced = self._unsynced, []
            for path in todo:
                if path not in self._syncing:
                    self._syncing[path] = _sync_pool().submit(sync_file, path)
            waiting = list(self._syncing.items())
        if not waiting:
            return
        failed: list[str] = []
        for path, future in waiting:
            try:
                future.result()
            except OSError as exc:
                failed.append(f"{path.name}: {exc}")
        with self._lock:
            for path, future in waiting:
                if self._syncing.get(path) is future:
                    del self._syncing[path]
        if todo and os.name != "nt":  # the folder's entries: the renames themselves
            try:
                sync_file(self.folder, directory=True)
            except OSError as exc:
                failed.append(f"{self.folder}: {exc}")
        if failed:
            raise SpillError(f"cannot sync spilled output to disk: {'; '.join(failed)}")
