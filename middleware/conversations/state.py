"""Everything kept between the requests of one conversation, in one object.

A conversation (one session, as :mod:`.keys` names it, under one policy) keeps: its key
and the policy snapshot its requests use; its spill store and the readings kept beside
its files; its frozen decisions; its prompt cache's clock and the moves made when the
cache was cold; the requests its next one may continue; the hold that keeps an object
store's gc off its folder while it is in use; and, in the ledger the conversations
share, the entry its answers are billed to, under its session. The engine
(:mod:`.engine`) runs the steps over it; this object opens, forgets and closes what it
keeps.

A :class:`ConversationState` is made at a conversation's first request (by
:class:`~middleware.conversations.sessions.SessionPool`, which decides when it forgets
what it holds in memory, releases it or ends it), or by a :class:`~middleware.Pipeline`
for its one session. docs/architecture.md has the table of what each part keeps,
where, for how long, and what a restart finds.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from middleware.cache import DerivedCache
from middleware.cache.kept import ReadingStore
from middleware.cache.messages import forget_messages
from middleware.conversations.readbacks import ReadBack, ReadBackWatch
from middleware.ledger.sums import Entry
from middleware.plugin.host import PluginHost
from middleware.policy import Policy
from middleware.policy.settings import bind
from middleware.report import Action, ProblemReport
from middleware.session.cold_cache import SessionCache
from middleware.session.decisions import Decision, DecisionLedger
from middleware.session.resume import Continuations
from middleware.spill import SpillSettings, open_store
from middleware.spill.remembered import RememberedStore
from middleware.spill.session_store import SessionStore
from middleware.view import Node


@dataclass(eq=False)
class ConversationState:
    """One conversation under one policy: the parts it keeps between requests, which
    this object opens, forgets and closes, and the calls running on them, which it
    waits for before it closes."""

    #: The policy's key in the pool, and the session.
    key: tuple[str, str]
    #: The snapshot new requests use (its holder swaps in a reloaded one).
    policy: Policy
    #: The plugins: the steps, and who provided the spill store.
    host: PluginHost
    #: Work reused between requests, which the decisions and the store's memory live in
    #: (shared with other conversations, or the conversation's own).
    cache: DerivedCache
    #: Where results cut from the context are kept in full: a plugin's store, guarded,
    #: or the session workspace, remembering what it saved (:mod:`.spill.remembered`).
    spill: SessionStore
    #: Budget decisions frozen per call id (see :mod:`middleware.session.decisions`).
    decisions: DecisionLedger
    #: The session's prompt cache as its requests and answers tell it, and the moves made
    #: when it was cold, recorded in the local workspace (see .session.cold_cache).
    prompt_cache: SessionCache
    #: The last request of each recent conversation, which the next may continue.
    continuations: Continuations
    #: Problems of plugins met while setting up (loading, providing the spill store),
    #: repeated in every report: fixed here, so they never grow.
    problems: tuple[ProblemReport, ...] = ()
    #: When its last request came, by the pool's clock.
    last_used: float = 0.0
    requests: int = 0
    #: :attr:`held_bytes` when the pool last counted it.
    held: int = 0
    #: What it remembers to tell the agent going back for what the steps hid.
    watch: ReadBackWatch = field(default_factory=ReadBackWatch)
    _closed: bool = field(default=False, init=False, repr=False)
    #: Calls running on it now; :meth:`close` waits for them.
    _active: int = field(default=0, init=False, repr=False)
    _idle: threading.Condition = field(default_factory=threading.Condition, init=False, repr=False)

    @classmethod
    def open(  # noqa: PLR0917 (a conversation's parts)
        cls,
        host: PluginHost,
        key: tuple[str, str],
        policy: Policy,
        cache: DerivedCache,
        now: float = 0.0,
        decisions: Iterable[Decision | Mapping[str, Any]] = (),
    ) -> ConversationState:
        """The state of the conversation ``key`` names, at its first request (``now``):
        the spill store a plugin of ``host`` provides, else the session's workspace as
        ``spill`` says; ``decisions`` restores budget decisions exported before."""
        found: list[ProblemReport] = []
        spill: SessionStore = host.spill_store(policy, key[1], found) or RememberedStore(
            open_store(key[1], bind(policy, SpillSettings)), cache
        )
        local = spill.local
        problems = list(host.load_problems)
        problems += (problem for problem in found if problem not in problems)
        return cls(
            key, policy, host, cache, spill, DecisionLedger(decisions, cache=cache),
            SessionCache(local), Continuations(), tuple(problems), now,
        )  # fmt: skip

    @property
    def session(self) -> str:
        return self.key[1]

    @property
    def readings(self) -> ReadingStore | None:
        """Where readings of result texts are kept in the session's own local workspace
        (``None``: kept in memory only)."""
        return self.spill.local

    def read_backs(self, parsed: Sequence[Node], actions: Sequence[Action]) -> tuple[ReadBack, ...]:
        """The read-backs newly seen in a request: its history ``parsed`` and what the
        steps did to it (``actions``)."""
        host, policy = self.host, self.policy
        return self.watch.observe(
            parsed, actions, lambda tool: host.tool_file_access(tool, [], policy=policy)
        )

    def answered(self, entry: Entry) -> None:
        """An answer to one of its requests was billed as ``entry``: what the prompt cache
        gave, against what was expected of it (a session whose provider reads none of it
        is rewritten as a cold one: :mod:`middleware.session.cold_cache`)."""
        self.prompt_cache.reported(entry.expected_read, entry.billed.cache_read)

    def hold(self, seconds: float) -> None:
        """Tell an object store's gc, which may run another policy, that the conversation
        is in use and may be for ``seconds`` more."""
        self.spill.hold(seconds)

    @property
    def held_bytes(self) -> int:
        """Memory held between requests (an estimate: the recent requests the next may
        continue, the frozen decisions, the read-backs watched), which the pool budgets."""
        return self.continuations.bytes + self.decisions.bytes + self.watch.bytes

    @contextmanager
    def running(self) -> Iterator[None]:
        """One call on the conversation: refused once it is closed, waited for by
        :meth:`close`."""
        with self._idle:
            if self._closed:
                raise RuntimeError("this pipeline is closed")
            self._active += 1
        try:
            yield
        finally:
            with self._idle:
                self._active -= 1
                self._idle.notify_all()

    def forget(self, *, cached: bool = False) -> None:
        """Drop what is held in memory between requests: the next request is processed as
        a restarted process would (the spilled files and readings are found again;
        decisions, admitted ones too, are made again). ``cached``: what the shared cache
        keeps of its last messages goes too (an ended conversation)."""
        marks = self.continuations.clear()
        self.decisions.clear()
        if cached:
            forget_messages(self.cache, marks)
        self.watch.clear()

    def release(self, until: float | None = None) -> None:
        """Let the calls running finish, refuse new ones, record the cache clock for a
        later process (waiting for its lock until ``until``, a ``time.monotonic()``, if
        given) and release the spill store; what is held in memory stays readable (the
        decisions to export). Releasing again does nothing."""
        with self._idle:
            if self._closed:
                return
            self._closed = True
            self._idle.wait_for(lambda: self._active == 0)
        self.prompt_cache.save(until=until)
        self.spill.close()

    def close(self, *, cached: bool = False, until: float | None = None) -> None:
        """:meth:`release` it, then drop what is held in memory (an answer still on its
        way holds the state, not what it held); ``cached``: as :meth:`forget` says."""
        self.release(until)
        self.forget(cached=cached)
