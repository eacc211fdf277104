"""The library's facade: one conversation's state cleaned under one policy source.

A :class:`Pipeline` is what a program embedding the middleware holds: a policy (loaded,
or a file watched, :mod:`middleware.policy.source`), one conversation's state
(:mod:`middleware.conversations.state`), and the engine that runs the steps over it
(:mod:`middleware.conversations.engine`, :mod:`middleware.conversations.dispatch`).
The proxy and the SDK integrations hold many conversations in a pool instead, and call
the engine the same way.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from middleware.cache import CacheSettings, DerivedCache
from middleware.conversations import dispatch, engine
from middleware.conversations.engine import ProcessResult
from middleware.conversations.state import ConversationState
from middleware.plugin.admission import Admission, Cap, ToolOutput
from middleware.plugin.capabilities import SpillStore
from middleware.plugin.host import PluginHost
from middleware.policy import Policy, load_policy
from middleware.policy.reload import PolicyStatus, PolicyWatcher
from middleware.policy.settings import bind
from middleware.policy.source import PolicySource
from middleware.session.cold_cache import SessionCache
from middleware.session.decisions import Decision, DecisionLedger

__all__ = ["Pipeline", "ProcessResult"]

#: The key of a pipeline's policy source and of its conversation (a pool's is the policy's).
KEY = "pipeline"


class Pipeline:
    """Cleans message histories under one policy.

    Safe to share between threads: ``process()`` reads one immutable policy snapshot and
    keeps all its state local. Use it as a context manager, or call :meth:`close`, to
    release the session's resources.
    """

    def __init__(
        self,
        policy: Policy,
        *,
        host: PluginHost | None = None,
        session_id: str | None = None,
        decisions: Iterable[Decision | Mapping[str, Any]] = (),
        cache: DerivedCache | None = None,
    ) -> None:
        self._open(PolicySource(KEY, policy), host, session_id, decisions, cache)

    def _open(
        self,
        source: PolicySource,
        host: PluginHost | None,
        session_id: str | None,
        decisions: Iterable[Decision | Mapping[str, Any]],
        cache: DerivedCache | None,
    ) -> None:
        self._source = source
        self._host = host if host is not None else PluginHost.create()
        policy = source.policy
        #: Work reused between requests (derived data of results, parsed messages): the
        #: given cache, shared with other pipelines, or one of the size the policy says.
        self.cache = cache if cache is not None else DerivedCache(
            bind(policy, CacheSettings).max_bytes
        )  # fmt: skip
        self.session_id = session_id if session_id is not None else uuid.uuid4().hex[:12]
        try:
            #: What the session keeps between requests, which this pipeline opened and
            #: closes (:class:`~middleware.conversations.state.ConversationState`).
            self.state = ConversationState.open(
                self._host, (KEY, self.session_id), policy, self.cache, decisions=decisions
            )
        except BaseException:
            source.close()
            raise
        source.follow(self._follow)

    def _follow(self, policy: Policy) -> None:
        """The source swapped in ``policy``: the calls that start from now on use it."""
        self.state.policy = policy

    @classmethod
    def from_policy(
        cls,
        policy: str | Path | Policy | None = None,
        *,
        host: PluginHost | None = None,
        session_id: str | None = None,
        watch: bool = False,
        decisions: Iterable[Decision | Mapping[str, Any]] = (),
        cache: DerivedCache | None = None,
    ) -> Pipeline:
        """A pipeline for a policy file, an already loaded :class:`Policy`, or ``None``
        for the embedded default policy.

        With ``watch=True`` (a file only), the policy's folder is watched: every valid edit
        swaps in a new snapshot (``policy_reloaded`` hooks fire after the swap); an invalid
        one keeps the last good policy and shows in :attr:`policy_status`. The spill
        workspace keeps the settings it was created with.

        ``decisions`` restores budget decisions exported with ``pipe.decisions.export()``
        (resuming a session keeps every result as it was sent before). ``cache`` shares
        one :class:`DerivedCache` between pipelines (one per session, say); by default
        each pipeline has its own, of the policy's ``cache.max_bytes``.
        """
        if not watch:
            loaded = policy if isinstance(policy, Policy) else load_policy(policy)
            return cls(loaded, host=host, session_id=session_id, decisions=decisions, cache=cache)
        if not isinstance(policy, (str, Path)):
            raise TypeError("watch=True needs the path of a policy file")
        host = host if host is not None else PluginHost.create()
        pipe = cls.__new__(cls)
        pipe._open(PolicySource(KEY, policy, host), host, session_id, decisions, cache)
        return pipe

    # -- the policy --------------------------------------------------------------------

    @property
    def policy(self) -> Policy:
        """The policy snapshot new ``process()`` calls use."""
        return self._source.policy

    @property
    def policy_status(self) -> PolicyStatus:
        """Generation, digest and the last reload's outcome of the policy in effect: a
        rejected edit (``last_error``), the ``policy_reloaded`` implementations that failed
        after the last swap (``plugin_problems``)."""
        return self._source.status

    @property
    def _watcher(self) -> PolicyWatcher | None:
        return self._source.watcher

    def reload_policy(self) -> bool:
        """Re-read a watched policy now (hosts that cannot wait for the watcher)."""
        if self._source.watcher is None:
            raise RuntimeError("this pipeline does not watch a policy file")
        return self._source.reload()

    def replace_policy(self, policy: Policy) -> None:
        """Use ``policy`` for the calls that start from now on (a host that reloads its
        policy itself, such as the proxy). Calls running keep the snapshot they started
        with; the spill store keeps the settings it was created with."""
        self._source.replace(policy)

    @property
    def host(self) -> PluginHost:
        return self._host

    # -- requests ----------------------------------------------------------------------

    def process(
        self,
        messages: Any,
        format: str = "auto",
        *,
        continuation: bool = False,
        now: float | None = None,
    ) -> ProcessResult:
        """Run the steps on ``messages``: pairing repair, budget enforcement and
        microcompaction, each in the place its hook declares.

        :param messages: a history in one of the wire formats (Anthropic Messages, OpenAI
            Chat Completions or Responses, Gemini ``generateContent``), or a whole request
            body (``{system, messages, ...}``, ``{input, instructions, ...}``,
            ``{contents, systemInstruction, ...}``); elements may be the official SDKs'
            objects. Never mutated. The result's ``output`` has the same shape.
        :param format: ``"auto"`` (detect) or a format's name (:data:`.FORMATS`).
        :param continuation: the provider holds earlier turns that ``messages`` does not
            repeat (a Responses request with ``previous_response_id``, which a body says by
            itself): results may answer calls it cannot see, so pairing repair leaves the
            history alone.
        :param now: when the request is sent, in seconds since the epoch: a request sent
            after the session was idle past the provider's cache lifetime
            (``ledger.cache_lifetime_seconds``) finds the cache cold, and microcompaction
            may rewrite old turns for free (:mod:`.session.cold_cache`). The proxy and
            the SDK integrations give it; without it, the output depends on the input,
            the policy and the session's record alone.
        :raises HistoryError: the history is malformed; the message says which message.
        """
        return engine.process(self.state, messages, format, continuation=continuation, now=now)

    @property
    def decisions(self) -> DecisionLedger:
        """Budget decisions frozen per call id (see :mod:`middleware.session.decisions`)."""
        return self.state.decisions

    @property
    def prompt_cache(self) -> SessionCache:
        """The session's prompt cache as its requests and answers tell it, and the moves
        made when it was cold (see :mod:`middleware.session.cold_cache`)."""
        return self.state.prompt_cache

    @property
    def continued(self) -> int:
        """Requests that continued the previous request of their conversation and were
        worked on in their new part only (:mod:`middleware.session.resume`)."""
        return self.state.continuations.continued

    @property
    def held_bytes(self) -> int:
        """Memory the session's state holds between requests (an estimate: the recent
        requests it may continue, its frozen decisions), which a session pool budgets."""
        return self.state.held_bytes

    def forget(self, *, cached: bool = False) -> None:
        """Drop the session's state held between requests: the next request is processed
        as a restarted process would (the spilled files and readings are found again;
        decisions, admitted ones too, are made again). ``cached``: what the cache keeps of
        its last messages goes too (an ended session)."""
        self.state.forget(cached=cached)

    @property
    def spill(self) -> SpillStore:
        """Where results cut from the context are kept in full: the store a plugin
        provided, as it returned it (the steps use it guarded), or the session workspace."""
        return self.state.spill.provided

    # -- dispatch ----------------------------------------------------------------------

    def admit(
        self,
        tool_name: str,
        tool_use_id: str,
        output: str,
        *,
        arguments: Any = None,
        parallel_calls: int = 1,
        context_chars: int | None = None,
        is_error: bool = False,
    ) -> Admission:
        """Bound one tool result at dispatch time, before it enters the history.

        The ``admit_outputs`` hook bounds it: the budget step runs on this result exactly
        as it would at request time (tool cap, line rule, spill with preview, empty-result
        text, the even share of ``parallel_calls`` calls, the context-aware ceiling after
        ``context_chars`` of history), and the outcome is frozen for ``tool_use_id``: when
        the result comes back in a request, the budget step leaves it as admitted.
        """
        output_ = ToolOutput(tool_name, tool_use_id, output, arguments, is_error)
        (admitted,) = self.admit_batch(
            [output_], parallel_calls=parallel_calls, context_chars=context_chars
        )
        return admitted

    def admit_batch(
        self,
        outputs: Sequence[ToolOutput],
        *,
        parallel_calls: int | None = None,
        context_chars: int | None = None,
    ) -> list[Admission]:
        """Bound the outputs of calls dispatched together, as one turn: besides each
        result's own bounds, the turn budget applies to them jointly (largest first, or
        the even share). Returns one :class:`Admission` per output, in order.

        An output may be a :class:`ToolOutput` or a mapping of its fields."""
        outputs = [ToolOutput.of(item) for item in outputs]
        return dispatch.admit_batch(self.state, outputs, parallel_calls, context_chars)

    def result_budget(
        self, tool_name: str, *, parallel_calls: int = 1, context_chars: int | None = None
    ) -> int | None:
        """Characters one result of ``tool_name`` may keep when ``parallel_calls`` calls
        run together after ``context_chars`` of history (Ethos' ``ctx.resultBudgetChars``),
        so a tool can trim at a meaningful boundary itself; ``None``: not limited."""
        return self.result_cap(
            tool_name, parallel_calls=parallel_calls, context_chars=context_chars
        ).max_chars

    def result_cap(
        self, tool_name: str, *, parallel_calls: int = 1, context_chars: int | None = None
    ) -> Cap:
        """:meth:`result_budget` together with where it comes from (the policy key or
        the plugin), as the budget step reports it."""
        return dispatch.result_cap(
            self.state, tool_name, parallel_calls=parallel_calls, context_chars=context_chars
        )

    # -- the end -----------------------------------------------------------------------

    def close(self) -> None:
        """Refuse new ``process()`` calls, wait for those running to finish, stop watching
        the policy, then release the session's spill workspace (what the state holds in
        memory stays readable: its decisions, to export)."""
        self.state.release()
        self._source.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
