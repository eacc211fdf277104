"""Retention: remove the session folders no session needs any more, from any store.

A folder's age is the time since anything was last written in it (by any replica: an
object store's replicas refresh the folder's marker as they use it). Only folders a store
created are removed, and of them only what a store wrote; a local workspace that a
running process holds open is left alone, and so is an object-store folder whose hold
has not ended (a process serving the session said until when it may still use it, by its
own policy, which may allow sessions to idle longer than the policy ``gc`` runs with).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from middleware.spill.layout import session_folder_name
from middleware.spill.roots import SessionFolder, SpillRoot

logger = logging.getLogger(__name__)

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """Seconds in an age such as ``7d``, ``12h``, ``30m``, ``45s`` or ``2w``."""
    match = _AGE.match(text)
    if match is None:
        raise ValueError(
            f"{text!r} is not an age: write a number and a unit, s, m, h, d or w (e.g. 7d)"
        )
    return float(match[1]) * _UNITS[match[2]]


@dataclass(frozen=True)
class Collected:
    """What :func:`collect` did: the folders it removed (or would, with ``dry_run``), and
    those old enough that it left alone because a process serving them holds them."""

    removed: list[SessionFolder] = field(default_factory=list)
    held: list[SessionFolder] = field(default_factory=list)


def collect(
    root: SpillRoot, older_than: float, *, now: float | None = None, dry_run: bool = False
) -> Collected:
    """Remove (or with ``dry_run`` only list) the session folders of ``root`` where
    nothing was written for ``older_than`` seconds and that no process holds at ``now``
    (POSIX time, default: the current time)."""
    now = time.time() if now is None else now
    cutoff = now - older_than
    done = Collected()
    for folder in root.sessions():
        if folder.in_use or folder.last_modified > cutoff:
            continue
        if folder.held_at(now):
            done.held.append(folder)
            logger.info("left %s/%s alone: a process serving it may use it until %s",
                        root.url, folder.name, utc(folder.held_until))  # fmt: skip
            continue
        if dry_run or root.remove(folder.name):
            done.removed.append(folder)
            if not dry_run:
                logger.info("removed %s/%s (%d results)", root.url, folder.name, folder.files)
    return done


def utc(moment: float | None) -> str:
    """A POSIX time as ``YYYY-MM-DD HH:MM UTC``."""
    if moment is None:
        return "never"
    return f"{datetime.fromtimestamp(moment, timezone.utc):%Y-%m-%d %H:%M} UTC"


def forget(root: SpillRoot, session_id: str) -> bool:
    """Remove one session's folder (its end is known); ``False`` if there was none, or
    it is in use."""
    return root.remove(session_folder_name(session_id))
