"""The conversations live in a process: one :class:`~.state.ConversationState` (its
policy snapshot, one spill workspace, one set of frozen decisions) per policy and
session, as :mod:`.keys` names the session.

What a conversation keeps in memory between requests (the requests it may continue, its
frozen decisions) is held under a byte budget: over it, the sessions used least recently forget
theirs, and their next request is processed as a restarted process would process it (from
the spilled files and readings, which stay). Memory is bounded by the budget, not by how
long sessions stay idle.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from middleware.cache import CacheSettings, DerivedCache
from middleware.cache.allocator import give_back
from middleware.conversations.state import ConversationState
from middleware.plugin.host import PluginHost
from middleware.policy import Policy
from middleware.policy.settings import bind, section, setting
from middleware.spill.workspace import RECORD_LOCK_SECONDS

logger = logging.getLogger(__name__)


@section("proxy")
@dataclass(frozen=True)
class SessionSettings:
    """How long and how much a session pool keeps: the proxy's keys, which the SDK and
    LiteLLM integrations' pools follow too."""

    idle_seconds: float = setting("proxy.session_idle_seconds")
    memory_bytes: int = setting("proxy.session_memory_bytes")


class Shares(Protocol):
    """Another holder of memory counted in the pool's budget (the proxy's console), which
    gives some back when the pool is over it, before any session forgets its state."""

    @property
    def held_bytes(self) -> int: ...

    def shed(self, over: int) -> int:
        """Free ``over`` bytes if it can; the bytes freed."""
        ...


@dataclass
class SessionPool:
    """One conversation's state per (policy, session), released after ``idle_seconds``
    without a request (its spill files stay: the previews the agent holds name them),
    whose memory between requests is held under ``max_bytes`` (least recently used
    forgotten first)."""

    host: PluginHost
    idle_seconds: float
    clock: Callable[[], float] = time.monotonic
    #: One cache of reused work for every session (made at the first request, of that
    #: policy's ``cache.max_bytes``): the same tool output or system prompt seen by two
    #: sessions is read once.
    cache: DerivedCache | None = None
    #: Bytes of session state (:attr:`.ConversationState.held_bytes`, an estimate) kept at most;
    #: ``None``: no bound. Checked as each request starts and at :meth:`trim`.
    max_bytes: int | None = None
    #: Times a session's state was forgotten to stay under ``max_bytes``.
    evictions: int = 0
    #: Memory held beside the conversations and counted in ``max_bytes`` (shed first).
    shares: Shares | None = None
    #: Least recently used first.
    _entries: OrderedDict[tuple[str, str], ConversationState] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def for_policy(cls, host: PluginHost, policy: Policy) -> SessionPool:
        """A pool idle and bounded as ``policy``'s :class:`SessionSettings` say."""
        settings = bind(policy, SessionSettings)
        return cls(host, settings.idle_seconds, max_bytes=settings.memory_bytes)

    def conversation(self, policy_key: str, policy: Policy, session: str) -> ConversationState:
        """The state of ``session`` under the policy named ``policy_key``, on the policy's
        latest snapshot: a request of it comes in."""
        key = (policy_key, session)
        with self._lock:
            now = self.clock()
            state = self._entries.get(key)
            stale = None
            if state is not None and now - state.last_used > self.idle_seconds:
                # Idle too long to trust its memory: `gc` may have removed what it names.
                stale, state = self._entries.pop(key), None
            if state is None:
                if self.cache is None:
                    self.cache = DerivedCache(bind(policy, CacheSettings).max_bytes)
                state = ConversationState.open(self.host, key, policy, self.cache, now)
                self._entries[key] = state
            elif state.policy is not policy:
                state.policy = policy  # for the requests that start from now on
            self._entries.move_to_end(key)
            state.last_used = now
            state.requests += 1
            released = []
            for idle, other in self._entries.items():  # the idle ones come first
                if now - other.last_used <= self.idle_seconds:
                    break
                released.append(idle)
            released_states = [self._entries.pop(idle) for idle in released]
            if stale is not None:
                released_states.append(stale)
            forgotten = self._over_budget()
        for old in released_states:
            old.close()
        self._forget(forgotten)
        state.hold(self.idle_seconds)
        return state

    def trim(self) -> None:
        """Forget the state of the sessions used least recently while the pool holds more
        than ``max_bytes`` (a host calls this when a request is done: what it left is
        counted then, not at the next request)."""
        with self._lock:
            forgotten = self._over_budget()
        self._forget(forgotten)

    def _over_budget(self) -> list[tuple[ConversationState, int]]:
        """Count what each conversation holds; take the state of the least recently used
        ones, the last one used too if it alone is over, until the rest fit (the pool's
        lock is held)."""
        if self.max_bytes is None:
            return []
        held = 0
        for state in self._entries.values():
            state.held = state.held_bytes
            held += state.held
        if self.shares is not None:
            shared = self.shares.held_bytes
            if held + shared > self.max_bytes:
                shared -= self.shares.shed(held + shared - self.max_bytes)
            held += shared
        forgotten = []
        for state in self._entries.values():
            if held <= self.max_bytes:
                break
            if state.held:
                forgotten.append((state, state.held))
                held -= state.held
                state.held = 0
                self.evictions += 1
        return forgotten

    def _forget(self, forgotten: list[tuple[ConversationState, int]]) -> None:
        for state, held in forgotten:
            logger.debug("session %s forgets %d bytes of state", state.session, held)
            state.forget()
        if forgotten:
            give_back(sum(held for _, held in forgotten))

    @property
    def held_bytes(self) -> int:
        """Bytes the conversations' state holds now (an estimate)."""
        with self._lock:
            states = list(self._entries.values())
        shared = self.shares.held_bytes if self.shares is not None else 0
        return shared + sum(state.held_bytes for state in states)

    def end(self, session: str) -> int:
        """Release ``session``'s conversations (under every policy), with what the shared
        cache keeps of their messages; returns how many. Their records wait for locks
        another process holds :data:`.RECORD_LOCK_SECONDS` in all."""
        with self._lock:
            keys = [key for key in self._entries if key[1] == session]
            ended = [self._entries.pop(key) for key in keys]
        freed = 0
        until = time.monotonic() + RECORD_LOCK_SECONDS
        for state in ended:
            freed += state.held_bytes
            state.close(cached=True, until=until)
        if ended:
            give_back(freed)
        return len(ended)

    def spilled_by(self, session: str, name: str) -> str | None:
        """The step that spilled the file ``name`` of ``session``, if a conversation of
        it held here saw it saved (:meth:`.ReadBackWatch.spilled_by`)."""
        with self._lock:
            states = [state for key, state in self._entries.items() if key[1] == session]
        return next(filter(None, (state.watch.spilled_by(name) for state in states)), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def close(self) -> None:
        """Close every conversation. Their records wait for locks another process holds
        :data:`.RECORD_LOCK_SECONDS` in all, not each: past it, a record still locked is
        not written (said in the log), and the other conversations close as ever."""
        with self._lock:
            states, self._entries = list(self._entries.values()), OrderedDict()
        until = time.monotonic() + RECORD_LOCK_SECONDS
        for state in states:
            state.close(until=until)
