"""Hot reload: watch the policy's folder, re-read every layer, swap one immutable snapshot.

The folder is watched, not the file: editors save by writing a temporary file and renaming
it over the old one, and Kubernetes ConfigMaps swap a ``..data`` symlink; both defeat a
watch on the file itself. Any change in a watched folder re-reads all layers; an invalid
edit keeps the last good policy and is reported.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from watchfiles import watch

from middleware.errors import PolicyError
from middleware.policy import Policy, load_policy
from middleware.report import ProblemReport

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PolicyStatus:
    """The state of a watched policy, like Prometheus' config_last_reload_successful."""

    source: str
    #: How many snapshots have been in effect (1 for the initial load).
    generation: int
    digest: str
    last_reload_ok: bool = True
    #: The last rejected edit's error (``file:line:col: $.path: message``), if any.
    last_error: str | None = None
    last_success_at: float = 0.0
    #: The ``policy_reloaded`` hook implementations that failed after the last swap
    #: (each logged and skipped; the swap itself stands).
    plugin_problems: tuple[ProblemReport, ...] = ()


class PolicyWatcher:
    """Re-loads a policy when its folder (or the ``.env`` folder) changes and hands each new
    valid snapshot to ``on_swap``. Runs in a daemon thread until :meth:`stop`."""

    def __init__(
        self,
        path: str | Path,
        on_swap: Callable[[Policy], None],
        *,
        env: Mapping[str, str] | None = None,
        dotenv_path: str | Path | Literal[False] | None = None,
        overrides: Mapping[str, Any] | None = None,
        debounce_ms: int = 50,
    ) -> None:
        self.path = Path(path)
        self._load_args: dict[str, Any] = {
            "env": env, "dotenv_path": dotenv_path, "overrides": overrides,
        }  # fmt: skip
        #: Called with each new valid snapshot, after the swap.
        self.on_swap = on_swap
        self._debounce_ms = debounce_ms
        self._stop = threading.Event()
        self._lock = threading.Lock()
        policy = self.load()
        self.status = PolicyStatus(str(self.path), 1, policy.digest, last_success_at=time.time())
        self.policy = policy
        # The folder as named, not resolved: a ConfigMap's resolved folder is replaced on
        # every update, while the mount folder stays (recursive watch covers ..data/).
        folders = {self.path.absolute().parent}
        if dotenv_path:
            folders.add(Path(dotenv_path).absolute().parent)
        self._folders = sorted(str(f) for f in folders)
        self._thread = threading.Thread(target=self._run, name="chatcli-policy-watch", daemon=True)

    def load(self) -> Policy:
        return load_policy(self.path, **self._load_args)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop watching and wait for the thread (it notices within a few milliseconds)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def reload(self) -> bool:
        """Re-read every layer now; swap if valid and different. Returns whether it swapped."""
        with self._lock:
            try:
                policy = self.load()
            except PolicyError as exc:
                self.status = replace(self.status, last_reload_ok=False, last_error=str(exc))
                logger.error("policy reload rejected, keeping the last good policy: %s", exc)
                return False
            ok = replace(self.status, last_reload_ok=True, last_error=None)
            if policy.digest == self.status.digest:
                self.status = ok
                return False
            self.status = replace(ok, generation=ok.generation + 1, digest=policy.digest,
                                  last_success_at=time.time())  # fmt: skip
            self.policy = policy
        logger.info("policy %s reloaded (generation %d)", self.path, self.status.generation)
        self.on_swap(policy)
        return True

    def _run(self) -> None:
        for _changes in watch(
            *self._folders,
            stop_event=self._stop,
            debounce=self._debounce_ms,
            step=10,
            rust_timeout=200,
            yield_on_timeout=True,
            raise_interrupt=False,
            watch_filter=None,  # any change re-reads; an unchanged digest swaps nothing
        ):
            if self._stop.is_set():
                return
            if _changes:
                self.reload()
