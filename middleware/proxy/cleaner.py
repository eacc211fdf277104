"""One model request's cleaning in the proxy: the pipeline run on its body (or beside it, in
observe mode), what it did counted in the metrics, what the console shows of it recorded,
and who asked, for the ledger. :mod:`.app` decides whether a request is cleaned and
forwards what this module hands back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from middleware.cache.allocator import give_back
from middleware.conversations.cleaning import Cleaned
from middleware.conversations.front import Conversations
from middleware.conversations.joining import Lobby
from middleware.conversations.keys import named_session
from middleware.formats.routes import Routed
from middleware.ledger import Caller
from middleware.ledger.callers import TAGS_HEADER, tags_of
from middleware.policy.source import PolicySource
from middleware.proxy.console.book import ConsoleBook, Note, agent_of
from middleware.proxy.metrics import Metrics
from middleware.proxy.observe import Observer, Projection
from middleware.proxy.policies import PolicyCatalog

#: Memory a request takes while it is cleaned, for each byte of its body (measured: five
#: to six times the body at its peak).
TRANSIENT_BYTES_PER_BYTE = 4


@dataclass
class RequestCleaner:
    """Cleans the proxy's model requests, over its policies, conversations, metrics,
    console, observer and the lobby where Gemini CLI runs wait for their conversation."""

    catalog: PolicyCatalog
    conversations: Conversations
    metrics: Metrics
    console: ConsoleBook | None
    observer: Observer
    lobby: Lobby

    def observe(
        self,
        raw: bytes,
        route: Routed,
        headers: Mapping[str, str],
        source: PolicySource,
        caller: str | None,
    ) -> tuple[Cleaned, Projection]:
        """Observe mode: ``raw`` goes as it came, and the pipeline runs on it beside the
        request (:mod:`.observe`). The request is filed under the session it names until
        its projection finds its conversation."""
        settings = self.catalog.settings

        def project() -> tuple[Cleaned, Caller]:
            cleaned, note, _ = self.clean(raw, route, headers, source, caller, observed=True)
            return cleaned, who(headers, caller, cleaned, route.codec.name, note)

        projection = self.observer.submit(
            len(raw), project, seconds=settings.observe_seconds, max_bytes=settings.observe_bytes
        )
        return Cleaned(raw, named_session(headers, {}), observed=True), projection

    def clean(  # noqa: PLR0917 (one request's parts)
        self,
        raw: bytes,
        route: Routed,
        headers: Mapping[str, str],
        source: PolicySource,
        caller: str | None,
        observed: bool = False,
    ) -> tuple[Cleaned, Note | None, Callable[[Cleaned], Caller]]:
        """Run the pipeline on one request body (in a worker thread; a route only billed
        goes as it came), count what it did, and record what the console shows of it
        (``caller``: the digest of its API key); with what records it and says who asked
        once it is filed, for a request that waits for its conversation (its record is
        made then, and a request of a conversation files what waited for it first).
        ``observed``: the request goes as it came (observe mode), and what the steps made
        of it is what they would have sent."""
        fmt = route.codec.name
        self.conversations.follow(self.catalog.default.policy)  # as reloaded
        now = self.conversations.ledger.clock()
        notes: list[Note | None] = [None]

        def noting(cleaned: Cleaned) -> Note | None:  # (finding the texts the model saw
            if self.console is None:  # may parse it)
                return None
            shown = replace(cleaned, observed=True) if observed else cleaned
            return self.console.note(shown, route=fmt, user_agent=headers.get("user-agent", ""),
                                     now=now, caller=caller)  # fmt: skip

        def noted(cleaned: Cleaned) -> None:
            if observed:  # nothing waits: a projection is filed as it is found
                notes[0] = noting(cleaned)
                return
            if cleaned.part is not None and cleaned.session is not None and not cleaned.waits:
                self.lobby.claim(cleaned.session, cleaned.part, caller)
            notes[0] = None if cleaned.waits else noting(cleaned)

        def late(cleaned: Cleaned) -> Caller:
            return who(headers, caller, cleaned, fmt, noting(cleaned))

        cleaned = self.conversations.request(
            raw, route.codec, headers, (source.key, source.policy), now=now, noted=noted,
            cleaned=route.cleaned,
        )  # fmt: skip
        note = notes[0]
        if observed:  # what went upstream is the body as it came
            cleaned = replace(cleaned, body=raw, observed=True)
        # What the request took while it was cleaned (the body parsed, the messages' exact
        # copies, the body written) is freed once it is answered: the allocator is asked to
        # give it back then, when that adds up to enough.
        give_back(TRANSIENT_BYTES_PER_BYTE * len(raw))
        if cleaned.untouched is not None:
            self.metrics.passthrough.labels(cleaned.untouched).inc()
        if cleaned.error is not None:
            self.metrics.failures.labels(type(cleaned.error).__name__).inc()
        if cleaned.report is not None:
            self.metrics.process_seconds.observe(cleaned.seconds)
            if not observed:  # what the steps did, not what they would have done
                self.metrics.record_report(cleaned.report)
        if cleaned.continued:
            self.metrics.continued.inc()
        self.metrics.record_readbacks(cleaned.readbacks)
        if cleaned.readback_error is not None:
            self.metrics.readback_errors.inc()
        return cleaned, note, late


def who(
    headers: Mapping[str, str],
    caller: str | None,
    cleaned: Cleaned,
    fmt: str | None,
    note: Note | None,
) -> Caller:
    """Who asked (``caller``: a digest of the API key), the request's ``x-chatcli-tags``,
    the agent its session is told to be and the console's record of it, for the ledger
    (``headers``: the request's, with lower-case names)."""
    key = cleaned.session
    agent = None if key is None else agent_of(key.source, fmt, headers.get("user-agent", ""))
    return Caller(
        caller=caller,
        tags=tags_of(headers.get(TAGS_HEADER)),
        agent=agent,
        request=None if note is None else note.key,
    )
