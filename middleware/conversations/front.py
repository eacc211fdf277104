"""What a host (the proxy, a wrapped SDK client, LangChain's middleware, LiteLLM's
callback) does with conversations: a request comes in and is cleaned by its conversation
at the time it is sent, an answer comes back and is billed to it (which also tells its
prompt cache what was read), a conversation ends.

Everything a conversation keeps between those calls is its
:class:`~middleware.conversations.state.ConversationState`, held by the pool
(:mod:`.sessions`) under its byte budget; the bills are kept by the ledger the host's
conversations share (:mod:`middleware.ledger`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from middleware.conversations.cleaning import Cleaned, as_it_came, clean_body, clean_history
from middleware.conversations.sessions import SessionPool, SessionSettings
from middleware.formats.base import Codec
from middleware.ledger import Caller, Ledger, LedgerSettings, UsageReader
from middleware.ledger.sums import Entry
from middleware.plugin.host import PluginHost
from middleware.policy import Policy
from middleware.policy.settings import bind
from middleware.records import Records, RecordSettings

logger = logging.getLogger(__name__)


@dataclass
class Conversations:
    """The conversations of one host, and the ledger their answers are billed to."""

    pool: SessionPool
    #: What the answers' usage says was billed, per session and in total.
    ledger: Ledger
    #: Where the ledger and the console record (``ledger.url``), every replica's together.
    records: Records

    @classmethod
    def open(cls, host: PluginHost, policy: Policy, *, replica: str | None = None) -> Conversations:
        """The conversations of a host whose own policy is ``policy``: the pool idle and
        bounded as its ``proxy`` section says, the records and the ledger as its ``ledger``
        section says (``replica``: the name its records carry, else the host name).

        :raises PolicyError: ``ledger.url`` names no database this works with.
        :raises SchemaVersionError: the records database was written by a newer release.
        """
        settings = bind(policy, RecordSettings)
        records = Records.shared(settings, replica=replica or settings.replica_name())
        try:
            ledger = Ledger.open(bind(policy, LedgerSettings), records)
        except BaseException:
            records.close()
            raise
        return cls(SessionPool.for_policy(host, policy), ledger, records)

    def follow(self, policy: Policy) -> None:
        """Hold the conversations' memory under the budget a reloaded ``policy`` says."""
        self.pool.max_bytes = bind(policy, SessionSettings).memory_bytes

    def request(
        self,
        raw: bytes,
        codec: Codec,
        headers: Mapping[str, str],
        policy: tuple[str, Policy],
        *,
        session: str | None = None,
        now: float | None = None,
        noted: Callable[[Cleaned], None] | None = None,
        cleaned: bool = True,
    ) -> Cleaned:
        """A request body in ``codec``'s format comes in: cleaned by its conversation's
        pipeline (:func:`.clean_body`, at ``now``, else the ledger's time), shown to
        ``noted`` (the proxy's console keeps its record then, which the budget counts), then
        the pool is trimmed to its budget (what this request left counts now, not at the
        next one).
        Without ``cleaned`` (a route only billed), it goes as it came (:func:`.as_it_came`)."""
        if not cleaned:
            kept = as_it_came(raw, codec, headers, session=session)
            if noted is not None:
                noted(kept)
            return kept
        when = self.ledger.clock() if now is None else now
        cleaned_body = clean_body(raw, codec, headers, self.pool, policy, session=session, now=when)
        if noted is not None:
            noted(cleaned_body)
        self.pool.trim()
        return cleaned_body

    def history(
        self,
        history: list[Any],
        codec: Codec,
        policy: tuple[str, Policy],
        *,
        session: str | None = None,
        now: float | None = None,
    ) -> Cleaned:
        """A request comes in from a host that holds it as objects (LangChain's messages,
        LiteLLM's arguments): its ``history``, in ``codec``'s wire format (the host looks
        it up once, at its entry), cleaned by its conversation as :meth:`request` cleans a
        body (at ``now``, else the ledger's time, so a request after the prompt cache went
        cold finds it cold), then the pool is trimmed. What goes is the result's
        ``messages`` (``None``: the history as it came: :func:`.clean_history`)."""
        when = self.ledger.clock() if now is None else now
        cleaned = clean_history(history, codec, self.pool, policy, session=session, now=when)
        self.pool.trim()
        return cleaned

    def answer(
        self,
        reader: UsageReader,
        cleaned: Cleaned | None,
        policy: Policy,
        who: Caller | None = None,
        now: float | None = None,
    ) -> Entry | None:
        """An answer comes back, read by ``reader``: billed under the session its request
        was filed under (``cleaned``: what became of the request; ``None``: it went as it
        came; ``who``: who asked, the request's tags and console record; ``now``: when it
        ended, if it is billed later, else the ledger's time), keyed by the
        provider's id of it, and what it read from the prompt cache told to its
        conversation. Its :class:`~middleware.ledger.sums.Entry`, or ``None`` if its usage
        could not be read or billing it failed (logged: never the reason an answer goes
        astray)."""
        who = replace(who if who is not None else Caller(), response_id=reader.response_id)
        read_back = cleaned.readbacks if cleaned is not None else ()
        try:
            entry = self.ledger.record(
                cleaned.session.session if cleaned is not None and cleaned.session else None,
                reader.codec,
                reader.usage,
                reader.model or (cleaned.model if cleaned is not None else None),
                bind(policy, LedgerSettings),
                footprints=cleaned.footprints if cleaned is not None else None,
                body_chars=len(cleaned.body) if cleaned is not None else 0,
                now=now,
                beside=cleaned is not None and cleaned.beside,
                who=who,
                refused=cleaned.refused if cleaned is not None else None,
                observed=cleaned is not None and cleaned.observed,
                readbacks=[found.result_chars for found in read_back],
            )
        except Exception:
            logger.exception("could not put an answer's usage in the ledger")
            return None
        if entry is not None and cleaned is not None and cleaned.conversation is not None:
            cleaned.conversation.answered(entry)
        return entry

    def end(self, session: str) -> int:
        """The client says ``session`` ended: release its conversations (under every
        policy) and what the shared cache keeps of their messages; how many. Its spilled
        files are the store's to remove (:func:`middleware.spill.retention.forget`)."""
        return self.pool.end(session)

    def close(self) -> None:
        self.pool.close()
        self.ledger.close()
        self.records.close()
