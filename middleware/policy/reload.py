"""Hot reload: watch the policy's files, re-read every layer, swap one immutable snapshot.

What is watched is the policy's own file and the files its ``extends`` chain names (and
the ``.env`` file, when one is given), nothing else: a shipped preset watches nothing, and
files written beside the policy (logs, spill folders, other policies) never cause a
re-read. Each file is watched through its folder, not by itself, and not recursively:
editors save by writing a temporary file and renaming it over the old one, and Kubernetes
ConfigMaps swap a ``..data`` symlink in the mounted folder; both defeat a watch on the file
itself. A change to one of those names (or to a ConfigMap's ``..`` entries) re-reads all
layers; an invalid edit keeps the last good policy and is reported; an edit that changes
the ``extends`` chain moves the watch to the new files.

The watcher thread must outlive anything: whatever a reload raises is recorded in the
status (``last_reload_ok=False``) and watching goes on; a watched folder that is deleted
(or renamed) is polled for and watched afresh when it comes back. A writer that does not
save atomically is not swapped in half-written: after a change, the files are re-read
until two reads ``settle_ms`` apart give the same outcome.
"""

from __future__ import annotations

import logging
import os
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

#: How many times the files are re-read while they keep changing before the watcher gives up
#: on this change (and reports it); the next change starts again.
SETTLE_ROUNDS = 50
#: How often a watched folder that has disappeared is looked for, in seconds.
POLL_SECONDS = 0.1
#: The pause before watching again after the watch itself failed, in seconds.
REARM_SECONDS = 1.0

#: What one read of the layers gave: a snapshot, or why there is none.
Outcome = Policy | Exception


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
    #: How many reloads were rejected since the policy was first loaded (a counter for
    #: monitoring; a bad file read twice counts twice; ``generation - 1`` were swapped in).
    rejected: int = 0
    #: The ``policy_reloaded`` hook implementations that failed after the last swap
    #: (each logged and skipped; the swap itself stands).
    plugin_problems: tuple[ProblemReport, ...] = ()


class PolicyWatcher:
    """Re-loads a policy when its folder (or the ``.env`` folder) changes and hands each new
    valid snapshot to ``on_swap``. Runs in a daemon thread until :meth:`stop`.

    ``settle_ms`` is how long the files must read the same before a change is swapped in: a
    writer that pauses longer than that in the middle of a file can still be seen
    half-written (save atomically: write a temporary file and rename it).
    """

    def __init__(
        self,
        path: str | Path,
        on_swap: Callable[[Policy], None],
        *,
        env: Mapping[str, str] | None = None,
        dotenv_path: str | Path | Literal[False] | None = None,
        overrides: Mapping[str, Any] | None = None,
        debounce_ms: int = 50,
        settle_ms: int = 100,
    ) -> None:
        self.path = Path(path)
        self._load_args: dict[str, Any] = {
            "env": env,
            "dotenv_path": dotenv_path,
            "overrides": overrides,
        }
        #: Called with each new valid snapshot, after the swap.
        self.on_swap = on_swap
        self._debounce_ms = debounce_ms
        self._settle_s = settle_ms / 1000
        self._stop = threading.Event()
        self._lock = threading.Lock()
        policy = self.load()
        self.status = PolicyStatus(str(self.path), 1, policy.digest, last_success_at=time.time())
        self.policy = policy
        self._dotenv = Path(dotenv_path).absolute() if dotenv_path else None
        self._targets = self._targets_of(policy)
        self._folders = sorted(self._targets)
        #: Reload once the next watch is in place: an edit made before a watch is armed (just
        #: after start, or while a deleted folder was coming back) raises no event.
        self._rearmed = True
        self._thread = threading.Thread(target=self._run, name="chatcli-policy-watch", daemon=True)

    def load(self) -> Policy:
        return load_policy(self.path, **self._load_args)

    @property
    def watching(self) -> tuple[Path, ...]:
        """The files watched (none for a shipped preset)."""
        return tuple(
            sorted(folder / name for folder, names in self._targets.items() for name in names)
        )

    def start(self) -> None:
        """Start watching, if there is a file to watch (a preset has none)."""
        if self._targets:
            self._thread.start()

    def _targets_of(self, policy: Policy) -> dict[Path, frozenset[str]]:
        """The folders to watch and, in each, the names that matter. A folder as named,
        not resolved: a ConfigMap's resolved folder is replaced on every update, while the
        mount folder stays."""
        files = [Path(f).absolute() for f in policy.files]
        if self._dotenv is not None:
            files.append(self._dotenv)
        targets: dict[Path, set[str]] = {}
        for file in files:
            targets.setdefault(file.parent, set()).add(file.name)
        return {folder: frozenset(names) for folder, names in targets.items()}

    def _relevant(self, change: object, path: str) -> bool:
        """Whether a change reported in a watched folder concerns the policy: one of its
        files, a ConfigMap's ``..data`` swap, or the folder itself."""
        changed = Path(path)
        names = self._targets.get(changed.parent)
        if names is not None and (changed.name in names or changed.name.startswith("..")):
            return True
        return changed in self._targets

    def stop(self) -> None:
        """Stop watching and wait for the thread (it notices within a few milliseconds)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def reload(self) -> bool:
        """Re-read every layer now, once (the caller says the files are complete); swap if
        valid and different. Returns whether it swapped. Never raises for a bad policy or a
        failing load: the error is in :attr:`status`."""
        return self._apply(self._attempt())

    def _attempt(self) -> Outcome:
        try:
            return self.load()
        except PolicyError as exc:
            return exc
        except Exception as exc:  # a bug, not a bad policy: report it, keep watching
            logger.exception("unexpected error while reloading the policy %s", self.path)
            return exc

    def _apply(self, outcome: Outcome) -> bool:
        with self._lock:
            if isinstance(outcome, Exception):
                error = str(outcome)
                if not isinstance(outcome, PolicyError):
                    error = (
                        f"{self.path}: unexpected {type(outcome).__name__} while loading the "
                        f"policy: {outcome}"
                    )
                self.status = replace(
                    self.status,
                    last_reload_ok=False,
                    last_error=error,
                    rejected=self.status.rejected + 1,
                )
                logger.error("policy reload rejected, keeping the last good policy: %s", error)
                return False
            policy = outcome
            ok = replace(self.status, last_reload_ok=True, last_error=None)
            if policy.digest == self.status.digest:
                self.status = ok
                return False
            self.status = replace(
                ok, generation=ok.generation + 1, digest=policy.digest, last_success_at=time.time()
            )
            self.policy = policy
        logger.info("policy %s reloaded (generation %d)", self.path, self.status.generation)
        try:
            self.on_swap(policy)
        except Exception:  # the snapshot is in effect; a listener's bug must not undo that
            logger.exception(
                "a listener of the policy swap failed (generation %d)", self.status.generation
            )
        return True

    def _settled_reload(self) -> bool:
        """Re-read until two reads ``settle_ms`` apart agree, then apply that outcome: a
        file caught half-written reads differently the second time."""
        outcome = self._attempt()
        for _ in range(SETTLE_ROUNDS):
            if self._stop.wait(self._settle_s):
                return False
            again = self._attempt()
            if _same(outcome, again):
                return self._apply(again)
            outcome = again
        waited = SETTLE_ROUNDS * self._settle_s
        return self._apply(PolicyError(
            f"the policy files kept changing for {waited:g} s; keeping the last good policy "
            "until they settle", source=str(self.path)))  # fmt: skip

    def _run(self) -> None:
        """Watch until stopped; nothing a reload or the watch raises ends the thread."""
        while not self._stop.is_set():
            try:
                self._watch_once()
            except FileNotFoundError:  # a folder went away as the watch was being armed
                self._rearmed = True
                self._stop.wait(POLL_SECONDS)
            except Exception:
                logger.exception("policy watcher failed; watching %s again", self.path)
                self._rearmed = True
                self._stop.wait(REARM_SECONDS)

    def _watch_once(self) -> None:
        """Watch the folders that exist until one of them disappears or is replaced (or
        until stopped). A deleted folder's watch is dead even if the folder comes back, so
        the watch is then dropped and :meth:`_run` arms a new one on what exists."""
        armed = self._identities()
        pairs = zip(self._folders, armed, strict=True)
        present = [str(folder) for folder, identity in pairs if identity is not None]
        if not present:  # nothing to watch: say so, and look for the folders to come back
            if self._rearmed:
                self._rearmed = False
                self._settled_reload()
            while not self._stop.wait(POLL_SECONDS):
                if self._identities() != armed:
                    self._rearmed = True
                    return
            return
        for changes in watch(
            *present,
            stop_event=self._stop,
            debounce=self._debounce_ms,
            step=10,
            rust_timeout=200,
            yield_on_timeout=True,  # every 200 ms at least: check the folders are still there
            raise_interrupt=False,
            recursive=False,
            watch_filter=self._relevant,
        ):
            if self._stop.is_set():
                return
            moved = self._identities() != armed or any(path in present for _, path in changes)
            if changes or moved or self._rearmed:
                self._rearmed = False
                self._settled_reload()
            if moved:
                self._rearmed = True
                return
            targets = self._targets_of(self.policy)
            if targets != self._targets:  # the extends chain changed: watch its files
                logger.info("policy %s now reads %s", self.path, ", ".join(
                    str(f) for f in self.policy.files))  # fmt: skip
                self._targets, self._folders = targets, sorted(targets)
                return

    def _identities(self) -> list[tuple[int, int] | None]:
        """Which folder each watched path is now (device and inode), ``None`` if none."""
        out: list[tuple[int, int] | None] = []
        for folder in self._folders:
            try:
                info = os.stat(folder)
            except OSError:
                out.append(None)
            else:
                out.append((info.st_dev, info.st_ino))
        return out


def _same(first: Outcome, second: Outcome) -> bool:
    """Whether two reads gave the same outcome (the same snapshot, or the same error)."""
    if isinstance(first, Policy) and isinstance(second, Policy):
        return first.digest == second.digest
    return type(first) is type(second) and str(first) == str(second)
