"""A local folder of session workspaces, as recall and retention see it."""

from __future__ import annotations

import logging
import os
import shutil
import stat
from pathlib import Path

from middleware.spill.bounded import read_result
from middleware.spill.layout import MARKER, RESULTS, is_result_name, is_session_folder
from middleware.spill.leases import LEASES, leases_held
from middleware.spill.roots import SessionFolder

logger = logging.getLogger(__name__)


class LocalRoot:
    """The folder ``path`` holding ``chatcli-agent-<session>/`` workspaces."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def url(self) -> str:
        return str(self.path)

    @property
    def trouble(self) -> None:
        """A local folder is never counted as down: each write says if it fails."""
        return None

    def read(self, folder: str, name: str) -> str | None:
        if not is_session_folder(folder) or not is_result_name(name):
            return None
        if not _ours(self.path / folder) or not _ours(self.path / folder / RESULTS):
            return None  # a link, or another user's folder
        return read_result(self.path / folder / RESULTS / name)

    def sessions(self) -> list[SessionFolder]:
        """The workspaces under the folder that a workspace created (they hold its marker)
        and that belong to this user."""
        try:
            entries = sorted(self.path.iterdir())
        except FileNotFoundError:
            return []
        folders = []
        for entry in entries:
            if not is_session_folder(entry.name) or not _ours(entry):
                continue
            times, files, size = [], 0, 0
            for item in (entry / MARKER, *_children(entry / LEASES)):
                info = _lstat(item)
                if info is not None:
                    times.append(info.st_mtime)
            if not times:
                continue  # no marker: not created by a workspace
            for item in _children(entry / RESULTS):
                info = _lstat(item)
                if info is not None and stat.S_ISREG(info.st_mode):
                    times.append(info.st_mtime)
                    files += 1
                    size += info.st_size
            folders.append(SessionFolder(entry.name, max(times), files, size, leases_held(entry)))
        return folders

    def remove(self, folder: str) -> bool:
        """Remove workspace ``folder`` if a workspace created it, it belongs to this user and
        no running process holds a lease in it."""
        if not is_session_folder(folder):
            return False
        entry = self.path / folder
        if not _ours(entry) or _lstat(entry / MARKER) is None or leases_held(entry):
            return False
        shutil.rmtree(entry)
        logger.info("removed spill workspace %s", entry)
        return True


def _ours(entry: Path) -> bool:
    """A real folder (not a link) of this user's."""
    info = _lstat(entry)
    if info is None or not stat.S_ISDIR(info.st_mode):
        return False
    return not hasattr(os, "getuid") or info.st_uid == os.getuid()


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _children(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []
