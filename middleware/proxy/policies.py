"""The policies a proxy serves: its own (hot-reloaded when it is a file) and those a request
selects with the path prefix ``/policy/NAME/``: a shipped preset (``preset:pi``) or a file
``NAME.yaml`` of the configured folder. A name is never a path. Each is a
:class:`~middleware.policy.source.PolicySource`."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from middleware.errors import MiddlewareError
from middleware.plugin.host import PluginHost
from middleware.policy.reload import PolicyStatus
from middleware.policy.resources import PRESET_PREFIX, preset_names
from middleware.policy.settings import bind
from middleware.policy.source import PolicySource
from middleware.proxy.settings import ProxySettings

logger = logging.getLogger(__name__)

#: Seconds a named file that failed to load is not parsed again while it is unchanged
#: (what it extends may have changed: it is then tried again).
RECHECK_SECONDS = 10.0
#: What a ``/policy/NAME/`` segment may be (besides ``preset:NAME``).
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")


def status_fields(status: PolicyStatus) -> dict[str, Any]:
    """A served policy's status as ``/healthz`` and the console give it."""
    return {
        "source": status.source,
        "generation": status.generation,
        "digest": status.digest,
        "last_reload_ok": status.last_reload_ok,
        "last_error": status.last_error,
        "rejected_edits": status.rejected,
    }


@dataclass
class PolicyCatalog:
    """The proxy's own policy and the named ones, each loaded on first use."""

    default: PolicySource
    folder: Path | None
    host: PluginHost
    overrides: dict[str, Any]

    def __post_init__(self) -> None:
        self._named: dict[str, PolicySource] = {}
        #: Why a named file could not be loaded, by name: (the file as it was, when, the
        #: error), so a request for it does not parse it again until it changes.
        self._failed: dict[str, tuple[tuple[int, int, int] | None, float, MiddlewareError]] = {}
        self._loading: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    @property
    def settings(self) -> ProxySettings:
        """The ``proxy`` section of the proxy's own policy, as hot reload last left it."""
        return bind(self.default.policy, ProxySettings)

    def get(self, name: str | None) -> PolicySource:
        """The policy ``name`` selects (``None``: the proxy's own). A named one is loaded
        on first use (a file can take a while: call this off the event loop); a file that
        failed to load fails again at once until it changes (or :data:`RECHECK_SECONDS`
        passed, for a change in what it extends).

        :raises LookupError: no preset or file of the folder has that name (the message
            says which names exist).
        :raises PolicyError: the named policy file is not valid.
        """
        if name is None:
            return self.default
        with self._lock:
            source = self._named.get(name)
        if source is not None:
            return source
        path = self._path(name)  # a name that is no policy is refused before anything is kept
        with self._lock:
            loading = self._loading.setdefault(name, threading.Lock())
        with loading:  # one load per name at a time; others wait for it, not for all
            with self._lock:
                source = self._named.get(name)
                failed = self._failed.get(name)
            if source is not None:
                return source
            seen = _identity(path)
            if (
                failed is not None
                and failed[0] == seen
                and (time.monotonic() - failed[1] < RECHECK_SECONDS)
            ):
                raise failed[2]
            try:
                source = PolicySource(name, path, self.host, self.overrides)
            except MiddlewareError as exc:
                with self._lock:
                    self._failed[name] = (seen, time.monotonic(), exc)
                raise
            with self._lock:
                self._failed.pop(name, None)
                self._named[name] = source
            return source

    def _path(self, name: str) -> str:
        if name.startswith(PRESET_PREFIX):
            if name[len(PRESET_PREFIX) :] not in preset_names():
                raise LookupError(f"no preset {name!r}: {self._offer()}")
            return name
        if self.folder is None or not _NAME.match(name) or ".." in name:
            raise LookupError(f"no policy {name!r}: {self._offer()}")
        path = self.folder / f"{name}.yaml"
        if not path.is_file():
            raise LookupError(f"no policy {name!r} in {self.folder}: {self._offer()}")
        return str(path)

    def _offer(self) -> str:
        """What a client may name (the presets; the folder's files are not listed to
        whoever reaches the port)."""
        names = ", ".join(f"{PRESET_PREFIX}{n}" for n in preset_names())
        folder = "" if self.folder is None else ", or the name of a policy the proxy serves"
        return f"choose one of {names}{folder}"

    def statuses(self) -> dict[str, PolicyStatus]:
        with self._lock:
            named = dict(self._named)
        return {"default": self.default.status, **{k: s.status for k, s in named.items()}}

    def close(self) -> None:
        self.default.close()
        with self._lock:
            for source in self._named.values():
                source.close()


def _identity(path: str) -> tuple[int, int, int] | None:
    """Which version of the file ``path`` is (inode, size, modification time)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns
