"""Where a host's policy comes from: one place that holds the snapshot new work uses, and
watches its file when it has one (the proxy's policies, :class:`~middleware.Pipeline`,
and :func:`~middleware.wrap` alike).

A watched file swaps in every valid edit (:mod:`.reload`), then the listener's
``policy_reloaded`` hooks are told, once per swap; an invalid edit keeps the last good
policy and shows in :attr:`PolicySource.status`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from middleware.policy import Policy, load_policy
from middleware.policy.reload import PolicyStatus, PolicyWatcher
from middleware.report import ProblemReport


class Reloaded(Protocol):
    """Who is told of each swap (the plugin host: its ``policy_reloaded`` hooks)."""

    def policy_reloaded(self, old: Policy, new: Policy, problems: list[ProblemReport]) -> None:
        """``new`` replaced ``old``; each failure of a listener goes in ``problems``."""
        ...


class PolicySource:
    """One policy: a file, watched (every valid edit swapped in, ``told`` once per swap,
    then the followers), a loaded :class:`Policy`, or ``None`` for the embedded default
    under ``overrides``."""

    def __init__(
        self,
        key: str,
        path: str | Path | Policy | None,
        told: Reloaded | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self.key = key
        self._told = told
        self._followers: list[Callable[[Policy], None]] = []
        self._watcher: PolicyWatcher | None = None
        #: The ``policy_reloaded`` failures of the last swap (in :attr:`status`).
        self._problems: tuple[ProblemReport, ...] = ()
        if isinstance(path, Policy):
            self._policy = path
        elif path is None:
            self._policy = load_policy(None, overrides=overrides)
        else:
            self._watcher = PolicyWatcher(path, self._swapped, overrides=overrides)
            self._policy = self._watcher.policy
            self._watcher.start()

    @property
    def policy(self) -> Policy:
        """The snapshot new work uses."""
        return self._policy

    @property
    def watcher(self) -> PolicyWatcher | None:
        """What watches the policy's files (``None``: a policy given loaded, not watched)."""
        return self._watcher

    @property
    def status(self) -> PolicyStatus:
        """Generation, digest and the last reload's outcome: a rejected edit
        (``last_error``), the ``policy_reloaded`` implementations that failed after the
        last swap (``plugin_problems``)."""
        if self._watcher is None:
            return PolicyStatus(self._policy.source, 1, self._policy.digest)
        return replace(self._watcher.status, plugin_problems=self._problems)

    def follow(self, told: Callable[[Policy], None]) -> None:
        """Have ``told`` called with each policy swapped in, after the plugins' hooks (how
        the command that configured the logs follows ``proxy.log.level``)."""
        self._followers.append(told)

    def replace(self, policy: Policy) -> None:
        """Use ``policy`` from now on, as a host that reloads its policy itself says: the
        followers are told, not the plugins' hooks (a watched file's next edit replaces
        it in turn)."""
        self._policy = policy
        for told in self._followers:
            told(policy)

    def reload(self) -> bool:
        """Re-read a watched policy now (hosts that cannot wait for the watcher); whether
        it swapped.

        :raises RuntimeError: the policy is not watched (it was given loaded).
        """
        if self._watcher is None:
            raise RuntimeError(f"the policy {self._policy.source} is not watched")
        return self._watcher.reload()

    def _swapped(self, new: Policy) -> None:
        old, self._policy = self._policy, new  # one reference: work never mixes two
        problems: list[ProblemReport] = []
        if self._told is not None:
            self._told.policy_reloaded(old, new, problems)  # each failure is logged
        # The reload's outcome, not every later request's: in status until the next swap.
        self._problems = tuple(problems)
        for told in self._followers:
            told(new)

    def close(self) -> None:
        """Stop watching (a source not watched has nothing to stop)."""
        if self._watcher is not None:
            self._watcher.stop()
