"""What a client :func:`middleware.wrap` returned cleans with: its policy's source, one
conversation's state per session, the ledger its answers are billed to, and the recall
tool's policy and answers. The transports (:mod:`.transports`) call it with each request
and each answer.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from middleware.conversations.cleaning import Cleaned
from middleware.conversations.front import Conversations
from middleware.conversations.sessions import SessionPool
from middleware.formats import jsonio
from middleware.formats.routes import client_route
from middleware.integrations import recall
from middleware.ledger import Ledger, UsageReader
from middleware.ledger.sums import Entry
from middleware.plugin.host import PluginHost
from middleware.policy import Policy, load_policy
from middleware.policy.settings import bind
from middleware.policy.source import PolicySource
from middleware.spill import SpillSettings

logger = logging.getLogger(__name__)


def route(method: str, path: str) -> str | None:
    """The wire format of a request whose body is a model request, else ``None``."""
    routed = client_route(method, path)
    return routed.codec.name if routed is not None else None


def billed_route(method: str, path: str) -> str | None:
    """The wire format of a request whose answer is billed as a model call (a token
    count is not), else ``None``."""
    routed = client_route(method, path)
    return routed.codec.name if routed is not None and routed.billed else None


#: The keys of a wrapped client's policies: of their sources, and in its pool.
WRAPPED, RECALL = "wrapped", "recall"


class Cleaner:
    """What a wrapped client cleans with: its policy's source (a file watched, or a policy
    loaded: :mod:`middleware.policy.source`, as the proxy and :class:`~middleware.Pipeline`
    hold theirs), one conversation's state per session, and (with ``tool_policy``) the
    source of the recall tool's policy, whose previews name the tool."""

    def __init__(
        self,
        policy: Policy | PolicySource,
        session_id: str | None = None,
        host: PluginHost | None = None,
        tool_policy: Policy | PolicySource | None = None,
    ) -> None:
        self.session_id = session_id
        self.host = host if host is not None else PluginHost.create()
        #: Where every request's policy comes from: the snapshot it reads when it starts.
        self.source = policy if isinstance(policy, PolicySource) else PolicySource(WRAPPED, policy)
        #: Where the policy of requests offered the recall tool comes from.
        self.tool_source = (
            PolicySource(RECALL, tool_policy) if isinstance(tool_policy, Policy) else tool_policy
        )
        #: What is kept of each conversation between its requests, and the ledger.
        self.conversations = Conversations.open(self.host, self.policy)
        self.source.follow(self.conversations.follow)  # the budget of a reloaded policy
        #: What became of the last request the client sent (its report, if processed).
        self.last: Cleaned | None = None

    @property
    def policy(self) -> Policy:
        """The policy snapshot the requests that start now use."""
        return self.source.policy

    @property
    def tool_policy(self) -> Policy | None:
        """The policy of requests offered the recall tool (``None``: none is offered)."""
        return self.tool_source.policy if self.tool_source is not None else None

    @property
    def pool(self) -> SessionPool:
        """One conversation's state per session, under the policy's byte budget."""
        return self.conversations.pool

    @property
    def ledger(self) -> Ledger:
        """What the answers' usage says was billed, per session and in total."""
        return self.conversations.ledger

    def bill(self, reader: UsageReader, cleaned: Cleaned | None) -> Entry | None:
        """Put one answer, read by ``reader``, in the ledger (``cleaned``: what became of
        its request; ``None``: it went as it came)."""
        return self.conversations.answer(reader, cleaned, self.policy)

    def prepare(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        raw: bytes,
        parsed: dict[str, Any] | None = None,
    ) -> tuple[bytes, dict[str, Any] | None, Cleaned | None]:
        """The body to send; if it offers the recall tool, the request as the agent made
        it (what a follow-up extends: offered the tool and cleaned again, it reads as
        every other request of the conversation); and what became of it (``None``: not a
        model request). ``parsed``: ``raw`` already read."""
        routed = client_route(method, path)
        if routed is None:
            return raw, None, None
        fmt = routed.codec.name
        if not routed.cleaned:  # only billed: as it came
            cleaned = self.conversations.request(
                raw, routed.codec, headers, (self.source.key, self.policy),
                session=self.session_id,
                cleaned=False,
            )  # fmt: skip
            self.last = cleaned
            return raw, None, cleaned
        agents = parsed if parsed is not None else self._parsed(path, raw)
        with_tool = recall.offered(fmt, agents) if agents is not None else None
        source = self.tool_source if with_tool and self.tool_source else self.source
        policy = (source.key, source.policy)
        sent = with_tool if with_tool is not None else parsed
        cleaned = self.conversations.request(
            raw if sent is None else json.dumps(sent).encode("utf-8"),
            routed.codec, headers, policy, session=self.session_id,
        )  # fmt: skip
        self.last = cleaned
        if cleaned.error is not None:
            logger.error("sent this %s request unchanged: %s", fmt, cleaned.error)
        return cleaned.body, agents if with_tool is not None else None, cleaned

    def _parsed(self, path: str, raw: bytes) -> dict[str, Any] | None:
        """The request body, if it may be offered the recall tool."""
        routed = client_route("POST", path)
        if self.tool_policy is None or routed is None or not routed.billed or routed.streamed:
            return None  # a token count, or an answer streamed by its path
        try:
            body = jsonio.loads(raw)
        except Exception:  # not JSON: cleaning leaves it as it is
            return None
        return body if isinstance(body, dict) else None

    def answer_recalls(
        self, path: str, sent: dict[str, Any], answer: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """What to do with the model's ``answer`` to the request ``sent``: ``(None,
        answer)`` to hand it to the agent (its recall calls taken out when it also calls
        the agent's own tools), or the follow-up request to send instead."""
        fmt = route("POST", path) or "anthropic"
        found, total = recall.calls(fmt, answer)
        if not found:
            return None, answer
        settings = bind(self.tool_policy or self.policy, SpillSettings)
        if len(found) < total:  # the agent's own tools too: it gets those
            logger.info(
                "the model called recall beside other tools; its recall calls are "
                "dropped from the answer"
            )
            return None, recall.without_calls(fmt, answer)
        results = [(call_id, recall.read(settings, arguments)) for call_id, arguments in found]
        return recall.follow_up(fmt, sent, answer, results), answer

    def close(self) -> None:
        """Close the conversations and the ledger, and stop watching the policy."""
        self.conversations.close()
        self.source.close()
        if self.tool_source is not None:
            self.tool_source.close()


def cleaner_for(
    policy: str | Path | Policy | None, session_id: str | None, recall_tool: bool, watch: bool
) -> Cleaner:
    """The cleaner of a wrapped client: its policy loaded, or its file watched (the plugins'
    ``policy_reloaded`` hooks told once per edit, by the source of the wrapped policy)."""
    if not watch:
        loaded = policy if isinstance(policy, Policy) else load_policy(policy)
        return Cleaner(
            loaded, session_id, tool_policy=recall.tool_policy(policy) if recall_tool else None
        )
    if not isinstance(policy, (str, Path)):
        raise TypeError("watch=True needs the path of a policy file")
    host = PluginHost.create()
    source = PolicySource(WRAPPED, policy, host)
    try:
        tools = PolicySource(RECALL, policy, overrides=recall.TOOL_FORM) if recall_tool else None
    except BaseException:
        source.close()
        raise
    return Cleaner(source, session_id, host, tools)
