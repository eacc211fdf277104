"""The state kept for each conversation: one pipeline (one spill workspace, one set of
frozen decisions) per policy and session, as :mod:`.keys` names the session."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from middleware.cache import CacheSettings, DerivedCache
from middleware.pipeline import Pipeline
from middleware.plugin.host import PluginHost
from middleware.policy import Policy
from middleware.policy.settings import bind
from middleware.spill.objects import hold_session

logger = logging.getLogger(__name__)


@dataclass
class _Entry:
    pipeline: Pipeline
    last_used: float
    requests: int = 0


@dataclass
class SessionPool:
    """One pipeline per (policy, session), released after ``idle_seconds`` without a
    request (its spill files stay: the previews the agent holds name them)."""

    host: PluginHost
    idle_seconds: float
    clock: Callable[[], float] = time.monotonic
    #: One cache of reused work for every session (made at the first request, of that
    #: policy's ``cache.max_bytes``): the same tool output or system prompt seen by two
    #: sessions is read once.
    cache: DerivedCache | None = None
    _entries: dict[tuple[str, str], _Entry] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def pipeline(self, policy_key: str, policy: Policy, session: str) -> Pipeline:
        """The pipeline of ``session`` under the policy named ``policy_key``, on the
        policy's latest snapshot."""
        now = self.clock()
        with self._lock:
            entry = self._entries.get((policy_key, session))
            stale = None
            if entry is not None and now - entry.last_used > self.idle_seconds:
                # Idle too long to trust its memory: `gc` may have removed what it names.
                stale, entry = self._entries.pop((policy_key, session)), None
            if entry is None:
                if self.cache is None:
                    self.cache = DerivedCache(bind(policy, CacheSettings).max_bytes)
                pipe = Pipeline(policy, host=self.host, session_id=session, cache=self.cache)
                entry = _Entry(pipe, now)
                self._entries[(policy_key, session)] = entry
            elif entry.pipeline.policy is not policy:
                entry.pipeline.replace_policy(policy)
            entry.last_used = now
            entry.requests += 1
            idle = [
                key
                for key, other in self._entries.items()
                if now - other.last_used > self.idle_seconds
            ]
            released = [self._entries.pop(key) for key in idle]
            if stale is not None:
                released.append(stale)
        for old in released:
            old.pipeline.close()
        # An object store's gc may run another policy: tell it the session is in use.
        hold_session(entry.pipeline.spill, self.idle_seconds)
        return entry.pipeline

    def end(self, session: str) -> int:
        """Release ``session``'s pipelines (under every policy); returns how many."""
        with self._lock:
            keys = [key for key in self._entries if key[1] == session]
            ended = [self._entries.pop(key) for key in keys]
        for entry in ended:
            entry.pipeline.close()
        return len(ended)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def close(self) -> None:
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            entry.pipeline.close()
