"""Everything kept between the requests of one conversation, in one object.

A conversation (one session, as :mod:`.keys` names it, under one policy) keeps: its key;
its spill store and the readings kept beside its files; its frozen decisions; its
prompt cache's clock and the moves made when the cache was cold; the request its next
one may continue (these four are :class:`~middleware.pipeline.SessionParts`, the
pipeline's mechanisms, opened and closed here); the hold that keeps an object store's
gc off its folder while it is in use; and, in the ledger the conversations share, the
entry its answers are billed to, under its session.

A :class:`ConversationState` is made at a conversation's first request, and
:class:`~middleware.conversations.sessions.SessionPool` decides when it forgets what it
holds in memory (over the byte budget), releases it (idle, or a new one replaces it)
or ends it (``DELETE /sessions/{id}``). docs/architecture.md has the table of what each
part keeps, where, for how long, and what a restart finds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from middleware.cache import DerivedCache
from middleware.conversations.readbacks import ReadBack, ReadBackWatch
from middleware.ledger.sums import Entry
from middleware.pipeline import Pipeline, ProcessResult, SessionParts
from middleware.plugin.host import PluginHost
from middleware.policy import Policy
from middleware.spill.objects import hold_session


@dataclass
class ConversationState:
    """One conversation under one policy: the pipeline that cleans its requests, and the
    parts it keeps between them, which this object opens, forgets and closes."""

    #: The policy's key in the pool, and the session.
    key: tuple[str, str]
    parts: SessionParts
    pipeline: Pipeline
    #: When its last request came, by the pool's clock.
    last_used: float
    requests: int = 0
    #: :attr:`held_bytes` when the pool last counted it.
    held: int = 0
    #: What it remembers to tell the agent going back for what the steps hid.
    watch: ReadBackWatch = field(default_factory=ReadBackWatch)

    @classmethod
    def open(
        cls,
        host: PluginHost,
        key: tuple[str, str],
        policy: Policy,
        cache: DerivedCache,
        now: float,
    ) -> ConversationState:
        """The state of the conversation ``key`` names, at its first request (``now``)."""
        parts = SessionParts.open(policy, host, key[1], cache)
        return cls(key, parts, Pipeline(policy, host=host, parts=parts), now)

    @property
    def session(self) -> str:
        return self.key[1]

    def process(self, document: Any, fmt: str, now: float | None) -> ProcessResult:
        """Clean one request of the conversation (:meth:`.Pipeline.process`)."""
        return self.pipeline.process(document, format=fmt, now=now)

    def read_backs(self, result: ProcessResult) -> tuple[ReadBack, ...]:
        """The read-backs newly seen in the request :meth:`process` gave ``result`` for."""
        host, policy = self.pipeline.host, self.pipeline.policy
        return self.watch.observe(
            result.parsed,
            result.report.actions,
            lambda tool: host.tool_file_access(tool, [], policy=policy),
        )

    def answered(self, entry: Entry) -> None:
        """An answer to one of its requests was billed as ``entry``: what the prompt cache
        gave, against what was expected of it (a session whose provider reads none of it
        is rewritten as a cold one: :mod:`middleware.session.cold_cache`)."""
        self.parts.prompt_cache.reported(entry.expected_read, entry.billed.cache_read)

    def hold(self, seconds: float) -> None:
        """Tell an object store's gc, which may run another policy, that the conversation
        is in use and may be for ``seconds`` more."""
        hold_session(self.pipeline.spill, seconds)

    @property
    def held_bytes(self) -> int:
        """Memory held between requests (an estimate), which the pool budgets."""
        return self.parts.held_bytes + self.watch.bytes

    def forget(self, *, cached: bool = False) -> None:
        """Drop what is held in memory between requests: the next request is processed as
        a restarted process would (the spilled files and readings are found again;
        decisions, admitted ones too, are made again). ``cached``: what the shared cache
        keeps of its last messages goes too (an ended conversation)."""
        self.parts.forget(cached=cached)
        self.watch.clear()

    def close(self, *, cached: bool = False, until: float | None = None) -> None:
        """Let the requests running finish, refuse new ones, record the cache clock for a
        later process (waiting for its lock until ``until``, a ``time.monotonic()``, if
        given), release the spill store and drop what is held in memory (an answer still
        on its way holds the state, not what it held); ``cached``: as :meth:`forget`
        says."""
        self.pipeline.close()
        self.parts.close(until)
        self.forget(cached=cached)
