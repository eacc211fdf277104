"""How every spill store lays out what it keeps, and the error every store raises.

A store has a root (a local folder, or an object-store URL such as ``s3://bucket/prefix``)
holding one folder per session, ``chatcli-agent-<session>/``, with a marker saying a
store created it and the results in ``tool-results/<key>-<digest16>.<suffix>``. A name
carries the first 16 hex digits of its content's SHA-256, so the same result always gets
the same name (prompt-cache stability, one object for every replica that saves it), and
a reader can check that what it reads is what was saved under that name.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass

from middleware.cache.digests import text_digest
from middleware.errors import MiddlewareError

#: Longest id fragment kept in a name; the content hash keeps names unique.
MAX_ID_CHARS = 64
#: The folder of a session's results, inside its session folder.
RESULTS = "tool-results"
#: The folder of a session's kept readings (:mod:`middleware.cache.kept`), beside its
#: results in a local workspace.
READINGS = "readings"
#: A session's record of what its history cannot tell (:mod:`middleware.session.cold_cache`),
#: in its local session folder.
RECORD = "session.json"
#: The marker a store writes in a session folder it creates (a local workspace writes
#: ``keep`` or ``remove`` in it: what happens when its last user closes).
MARKER = ".chatcli-workspace"
#: What an object store's marker holds.
SHARED = b"shared\n"
#: Beside its marker, each process that serves a session from an object store keeps a
#: hold, ``.chatcli-held-until-<POSIX seconds>-<process>``: the time until which it may
#: still use the session, whatever the policy of the one who runs ``gc``. The time is in
#: the name, so a listing tells it.
HOLD_PREFIX = ".chatcli-held-until-"
PREFIX = "chatcli-agent-"

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_SUFFIX = re.compile(r"^\.[a-z0-9]{1,8}$")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}-(?P<digest>[0-9a-f]{16})\.[a-z0-9]{1,8}$")
_READING = re.compile(r"^[a-z][a-z-]{0,31}-[0-9a-f]{40}$")
_FOLDER = re.compile(r"^chatcli-agent-[A-Za-z0-9_-]{1,64}(?:\.[0-9a-f]{16})?$")
_HOLD = re.compile(r"^\.chatcli-held-until-(?P<until>[0-9]{1,12})-[0-9a-f]{12}$")


class SpillError(MiddlewareError, OSError):
    """A spill store that cannot be created, written or reached (disk full, read-only,
    unsafe, an object store that is down or refuses the credentials)."""


class SpillTimeout(SpillError):
    """An object store that did not answer within ``spill.timeout_seconds``."""


def describe(exc: BaseException) -> str:
    """``Type: message``: how a store's own error is named in a :class:`SpillError`."""
    return f"{type(exc).__name__}: {exc}"


def safe_fragment(text: str, *, fallback: str = "result") -> str:
    """``text`` reduced to ``[A-Za-z0-9_-]``, at most :data:`MAX_ID_CHARS` long."""
    return _UNSAFE.sub("_", text.strip())[:MAX_ID_CHARS] or fallback


def session_folder_name(session_id: str) -> str:
    """The folder's name for a session id, one per id: a readable id is used as it is; any
    other gets its safe characters plus a digest of the id after a ``.`` (which a readable
    id never contains), so ``team/alice`` and ``team.alice`` differ."""
    if _UNSAFE.search(session_id) is None and 0 < len(session_id) <= MAX_ID_CHARS:
        return f"{PREFIX}{session_id}"
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{PREFIX}{safe_fragment(session_id, fallback='session')[:40]}.{digest}"


def spill_file_name(key: str, content: str, suffix: str = ".txt") -> str:
    """The name a result gets: sanitised key, 16 hex digits of SHA-256, suffix."""
    if not _SUFFIX.match(suffix):
        raise ValueError(f"invalid spill file suffix {suffix!r} (expected e.g. '.txt')")
    return f"{safe_fragment(key)}-{text_digest(content)[:16]}{suffix}"


def is_result_name(name: str) -> bool:
    """Whether ``name`` is one :func:`spill_file_name` gives."""
    return _NAME.match(name) is not None


def is_reading_name(name: str) -> bool:
    """Whether ``name`` is one :func:`middleware.cache.kept.reading_name` gives."""
    return _READING.match(name) is not None


def is_session_folder(name: str) -> bool:
    """Whether ``name`` is one :func:`session_folder_name` gives."""
    return _FOLDER.match(name) is not None


def hold_name(until: float, process: str) -> str:
    """The name of the hold that ``process`` (12 hex digits) keeps until POSIX time
    ``until`` (rounded up: a hold never reads shorter than it was meant)."""
    return f"{HOLD_PREFIX}{math.ceil(until)}-{process}"


def held_until(name: str) -> float | None:
    """The POSIX time a hold named ``name`` lasts until; ``None`` if it is not a hold."""
    match = _HOLD.match(name)
    return float(match["until"]) if match is not None else None


def verified_text(name: str, data: bytes) -> str | None:
    """``data`` as text if it is what a store saved under ``name`` (its digest matches the
    name's and it decodes), else ``None``."""
    match = _NAME.match(name)
    if match is None or hashlib.sha256(data).hexdigest()[:16] != match["digest"]:
        return None
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None


@dataclass(frozen=True)
class SpillKey:
    """Where a location points: the store's root, a session folder, a result's name."""

    root: str
    folder: str
    name: str


def split_location(location: str, separator: str = "/") -> SpillKey | None:
    """``<root>/<session folder>/tool-results/<name>`` split into its parts, or ``None``
    for anything else (a path outside the layout, ``..``, a name no store gives)."""
    parts = location.rsplit(separator, 3)
    if len(parts) != 4:
        return None
    root, folder, results, name = parts
    if results != RESULTS or not is_session_folder(folder) or not is_result_name(name):
        return None
    return SpillKey(root, folder, name)
