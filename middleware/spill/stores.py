"""The one place a spill store is chosen from the policy: ``spill.url`` (or ``spill.root``)
names a local folder or an object store, and every user (the pipeline, recall, retention,
the proxy) opens it here."""

from __future__ import annotations

import json
import stat
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from middleware.errors import MissingExtraError
from middleware.spill.bounded import unlike
from middleware.spill.layout import SpillError
from middleware.spill.local import LocalRoot
from middleware.spill.objects import ObjectRoot, ObjectWorkspace
from middleware.spill.roots import SpillRoot
from middleware.spill.settings import SpillSettings
from middleware.spill.workspace import SpillWorkspace

#: The extra that installs the supported object store, and its requirement.
EXTRA = ("s3", "s3fs>=2024.3")
#: The botocore client settings of an ``s3://`` store whose ``spill.storage_options``
#: set no ``config_kwargs``: botocore's own (five attempts with back-off) make a store
#: that is down cost about 8 s per request; these make it about half a second, and the
#: save then fails over to ``spill.on_error``.
S3_CLIENT = {"connect_timeout": 5, "read_timeout": 60, "retries": {"max_attempts": 2}}

_roots: dict[str, ObjectRoot] = {}
_roots_lock = threading.Lock()


def open_store(session_id: str, settings: SpillSettings) -> SpillWorkspace | ObjectWorkspace:
    """The spill store of one session under the policy's ``spill`` section."""
    folder = local_folder(settings)
    if folder is not None:
        return SpillWorkspace(session_id, folder, keep=settings.keep)
    return object_root(settings).workspace(session_id, hold=settings.session_idle_seconds)


def open_root(settings: SpillSettings) -> SpillRoot:
    """The root of the policy's store, for recall and retention."""
    folder = local_folder(settings)
    return LocalRoot(folder) if folder is not None else object_root(settings)


def check_local_folder(settings: SpillSettings) -> None:
    """Refuse a local store whose folder is something else than a folder (a FIFO, a file,
    a device: every spill there would fail); one that does not exist yet is made at the
    first spill. Nothing is opened to tell (``stat``: a FIFO never blocks it).

    :raises SpillError: saying which path, what it is, and what to set instead.
    """
    folder = local_folder(settings)
    try:
        found = None if folder is None else unlike(folder, stat.S_ISDIR)
    except OSError as exc:
        raise SpillError(f"cannot use the spill folder {folder} (spill.root): {exc}") from exc
    if found is not None:
        raise SpillError(
            f"the spill folder {folder} is {found}, not a folder: set spill.root (or "
            "spill.url) to a folder, or to a path where one can be made"
        )


def with_url(settings: SpillSettings, url: str) -> SpillSettings:
    """``settings`` naming the store ``url`` (a folder or a URL) instead."""
    return replace(settings, url=url)


def is_local(url: str) -> bool:
    """Whether ``url`` names a local folder: a path, or a ``file://`` URL."""
    scheme = urlparse(url).scheme
    return "://" not in url or scheme == "file"


def local_folder(settings: SpillSettings) -> Path | None:
    """The folder of a local store, or ``None`` for an object store."""
    if settings.url is None:
        return Path(settings.root) if settings.root is not None else Path(tempfile.gettempdir())
    return local_path(settings.url)


def local_path(url: str) -> Path | None:
    """The path a local ``url`` (a path, or a ``file://`` URL) names; ``None`` for a URL
    that is not local."""
    if not is_local(url):
        return None
    return Path(unquote(urlparse(url).path)) if url.startswith("file://") else Path(url)


def object_root(settings: SpillSettings) -> ObjectRoot:
    """The process's one :class:`ObjectRoot` for the settings' URL and options (its memory
    of what is stored, and of a store that is down, is shared by every session)."""
    url = settings.url
    if url is None or is_local(url):
        raise ValueError(f"not an object-store URL: {url!r}")
    options = dict(settings.storage_options)
    identity = json.dumps(
        [url, options, settings.retry_after_seconds, settings.timeout_seconds],
        sort_keys=True,
        default=str,
    )
    with _roots_lock:
        root = _roots.get(identity)
        if root is None:
            fs, base = _filesystem(url, options)
            root = _roots[identity] = ObjectRoot(
                fs, base, retry_after=settings.retry_after_seconds, timeout=settings.timeout_seconds
            )
        return root


def _filesystem(url: str, options: dict[str, Any]) -> tuple[Any, str]:
    """fsspec's filesystem for ``url``, as a one-line error naming the fix if it cannot be
    opened."""
    protocol = urlparse(url).scheme.lower()
    feature = f"spill.url {url}"
    try:
        from fsspec.core import url_to_fs  # noqa: PLC0415 - the [s3] extra, only when used
    except ImportError as exc:
        raise MissingExtraError(*EXTRA, feature) from exc
    if protocol in ("s3", "s3a") and "config_kwargs" not in options:
        options = {**options, "config_kwargs": S3_CLIENT}
    try:
        fs, base = url_to_fs(url, **options)
    except ImportError as exc:  # fsspec knows the protocol; its package is missing
        if protocol in ("s3", "s3a"):
            raise MissingExtraError(*EXTRA, feature) from exc
        raise SpillError(f"{feature}: {exc}") from exc
    except (ValueError, TypeError) as exc:
        raise SpillError(
            f"{feature} cannot be opened ({exc}): use a local folder, or a URL such as "
            "s3://bucket/prefix with the options its filesystem takes in spill.storage_options"
        ) from exc
    if not base.strip("/").split("/")[0]:
        raise SpillError(f"{feature} names no bucket: use e.g. s3://bucket/prefix")
    return fs, str(base)
