"""Read a spilled output back by the key its preview names, from any store.

A key is what a preview names: the local path of a result (a local store), its URL
(``s3://bucket/prefix/chatcli-agent-<session>/tool-results/<name>``), or the short form
``<session>/<name>`` the proxy's ``GET /recall/<session>/<name>`` takes, read in the
policy's store. Only results a store wrote are read: the key must have the store's layout
(no ``..``, no other file) and the content must match the digest in its name.

``offset`` and ``limit`` count lines, as an agent's file-reading tool does: ``offset`` is
the first line to return (1 for the first), ``limit`` the most lines to return.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from middleware.errors import MiddlewareError
from middleware.spill.layout import (
    RESULTS,
    is_result_name,
    session_folder_name,
    split_location,
)
from middleware.spill.local import LocalRoot
from middleware.spill.roots import SpillRoot
from middleware.spill.settings import SpillSettings
from middleware.spill.stores import is_local, local_path, open_root, with_url

LAYOUT = "<store>/chatcli-agent-<session>/tool-results/<name>-<digest16>.<suffix>"
#: URL schemes of the object stores a key may name; ``http://`` and the like never (a key
#: from a preview an agent quotes must not make the process fetch a web address).
STORE_SCHEMES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "memory"})


class RecallError(MiddlewareError, LookupError):
    """A key that names no spilled output, or lines past its end."""


@dataclass(frozen=True)
class Recalled:
    """Lines ``first`` to ``last`` (1-based, inclusive) of a spilled output of ``total``
    lines; ``text`` keeps their line breaks."""

    text: str
    location: str
    first: int
    last: int
    total: int


def recall(
    key: str, settings: SpillSettings, *, offset: int = 1, limit: int | None = None
) -> Recalled:
    """The lines ``offset`` to ``offset + limit - 1`` of the output ``key`` names."""
    if offset < 1:
        raise RecallError(f"offset {offset} is not a line number: the first line is 1")
    if limit is not None and limit < 1:
        raise RecallError(f"limit {limit} must be at least 1 line")
    root, folder, name = resolve(key, settings)
    text = root.read(folder, name)
    if text is None:
        raise RecallError(
            f"no spilled output at {key!r} in {root.url} (recall reads only what a spill "
            f"store saved, {LAYOUT}, with the content its digest names)"
        )
    return lines_of(text, f"{root.url}/{folder}/{RESULTS}/{name}", offset, limit)


def resolve(key: str, settings: SpillSettings) -> tuple[SpillRoot, str, str]:
    """The store, session folder and result name ``key`` names."""
    session, _, name = key.rpartition("/")
    if session and "/" not in session and session != RESULTS and is_result_name(name):
        return open_root(settings), session_folder_name(session), name
    if is_local(key) and session and is_result_name(name) and not _is_results_path(session):
        # A session id with a slash in it (``team/alice/NAME``): not a store's path.
        return open_root(settings), session_folder_name(session), name
    if not is_local(key):
        scheme = key.split("://", 1)[0].lower()
        if scheme not in STORE_SCHEMES:
            raise RecallError(
                f"{key!r} is not in a spill store: recall reads a local path, an object "
                f"store's URL ({', '.join(sorted(STORE_SCHEMES))}) or SESSION/NAME, never a "
                "web address"
            )
        parts = split_location(key)
        if parts is None:
            raise RecallError(f"{key!r} is not the URL of a spilled output ({LAYOUT})")
        configured = open_root(settings)
        if configured.url != parts.root:  # a store the policy does not name: its own URL
            configured = open_root(with_url(settings, parts.root))
        return configured, parts.folder, parts.name
    path = Path(key) if (local := local_path(key)) is None else local.absolute()
    if path.parent.name != RESULTS:
        raise RecallError(f"{key!r} is not the path of a spilled output ({LAYOUT})")
    return LocalRoot(path.parent.parent.parent), path.parent.parent.name, path.name


def _is_results_path(folder: str) -> bool:
    """Whether ``folder`` is the results folder of a local store (``.../tool-results``)."""
    local = local_path(folder)
    return local is not None and local.name == RESULTS


def lines_of(text: str, location: str, offset: int, limit: int | None) -> Recalled:
    """The lines of ``text`` from ``offset``, at most ``limit`` of them."""
    lines = [line + "\n" for line in text.split("\n")]  # only "\n" ends a line
    lines[-1] = lines[-1][:-1]
    if not lines[-1]:
        lines.pop()
    total = len(lines)
    if offset > max(total, 1):
        raise RecallError(f"offset {offset} is past the end of {location}: it has {total} lines")
    chosen = lines[offset - 1 : None if limit is None else offset - 1 + limit]
    return Recalled("".join(chosen), location, offset, offset - 1 + len(chosen), total)
