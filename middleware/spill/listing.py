"""What retention needs of an object store: its session folders with their age and holds,
and the removal of what a store wrote in one of them (nothing else)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from middleware.spill.layout import (
    MARKER,
    RESULTS,
    SHARED,
    SpillError,
    describe,
    held_until,
    is_result_name,
    is_session_folder,
)
from middleware.spill.roots import SessionFolder

logger = logging.getLogger(__name__)


def folders_in(fs: Any, base: str, url: str) -> list[SessionFolder]:
    """The session folders under ``base`` of ``fs`` (``url``) that hold a store's marker,
    each with its newest object's time, its results and its latest hold (read from the
    holds' names: no request per folder)."""
    try:
        listing = fs.find(base, detail=True)
    except FileNotFoundError:
        return []
    except Exception as exc:
        raise SpillError(f"cannot list the spill store {url}: {describe(exc)}") from exc
    found: dict[str, list[Mapping[str, Any]]] = {}
    for path, info in listing.items():
        folder, _, rest = path[len(base) + 1 :].partition("/")
        if is_session_folder(folder) and rest:
            found.setdefault(folder, []).append({**info, "rest": rest})
    folders = []
    for folder, objects in sorted(found.items()):
        if not any(o["rest"] == MARKER for o in objects):
            continue  # not created by a store: never ours to remove
        times = [t for t in (_modified(o) for o in objects) if t is not None]
        if not times:
            logger.warning("cannot tell the age of %s/%s: left alone", url, folder)
            continue
        results = [o for o in objects if _is_result(o["rest"])]
        size = sum(int(o.get("size") or 0) for o in results)
        holds = [t for t in (held_until(o["rest"]) for o in objects) if t is not None]
        held = max(holds) if holds else None
        folders.append(SessionFolder(folder, max(times), len(results), size, held_until=held))
    return folders


def remove_folder(fs: Any, base: str, url: str, folder: str) -> bool:
    """Remove the results, the leftovers of interrupted writes, the holds and the marker
    of ``folder`` (the marker last: a folder half removed is still found by ``gc``);
    ``False`` if it holds no marker.

    A process still writing into the folder may add a result meanwhile: the folder is
    listed again once the marker is gone, and if a store wrote anything since, the marker
    is put back, so what was written is removed by a later ``gc`` instead of left for good.
    """
    if not is_session_folder(folder):
        return False
    prefix = f"{base}/{folder}"
    try:
        paths = fs.find(prefix)
    except FileNotFoundError:
        return False
    except Exception as exc:
        raise SpillError(f"cannot list {url}/{folder}: {describe(exc)}") from exc
    marker = f"{prefix}/{MARKER}"
    if marker not in paths:
        return False
    ours = [p for p in paths if p != marker and _is_ours(p[len(prefix) + 1 :])]
    try:
        if ours:
            fs.rm(ours)
        fs.rm_file(marker)
        since = written_in(fs, base, folder)
        if since:
            fs.pipe_file(marker, SHARED)
    except Exception as exc:
        raise SpillError(f"cannot remove {url}/{folder}: {describe(exc)}") from exc
    if since:
        logger.warning(
            "%s/%s: %d objects were written while it was being removed; its marker is back, "
            "so a later gc removes them", url, folder, len(since),
        )  # fmt: skip
    return True


def written_in(fs: Any, base: str, folder: str) -> list[str]:
    """The paths of what a store wrote in ``folder`` besides its marker (results,
    leftovers of interrupted writes, holds): one listing."""
    prefix = f"{base}/{folder}"
    try:
        found: list[str] = fs.find(prefix)
    except FileNotFoundError:
        return []
    return [path for path in found if _is_ours(path[len(prefix) + 1 :])]


def _is_ours(rest: str) -> bool:
    """Whether ``rest`` (a path inside a session folder) is something a store writes there
    besides its marker: a result, the leftover of an interrupted write, a hold."""
    return _is_result(rest, partial=True) or held_until(rest) is not None


def _is_result(rest: str, *, partial: bool = False) -> bool:
    """Whether ``rest`` (a path inside a session folder) is a result a store writes, or
    with ``partial`` the leftover of an interrupted write."""
    results, _, name = rest.partition("/")
    if results != RESULTS or "/" in name:
        return False
    return is_result_name(name) or (partial and name.startswith(".partial-"))


def _modified(info: Mapping[str, Any]) -> float | None:
    """An object's modification time from a listing (S3's ``LastModified``, a local or
    memory filesystem's ``mtime`` or ``created``)."""
    for field in ("LastModified", "mtime", "last_modified", "updated", "created"):
        value = info.get(field)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None
