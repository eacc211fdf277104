"""The pipeline: parse a history, run the steps in their places, write it back."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from middleware.cache import CacheSettings, DerivedCache, Identity
from middleware.cache.digests import request_scope
from middleware.cache.kept import ReadingStore
from middleware.cache.messages import MessageMemo, forget_messages, message_mark
from middleware.formats import detect_format, get_codec
from middleware.formats.base import Codec
from middleware.formats.requests import Request, read_request
from middleware.formats.text_protocol import text_protocol_rule
from middleware.plugin.admission import (
    DISPATCH_FORMAT,
    Admission,
    Cap,
    ToolOutput,
    batch_conversation,
    check_batch,
)
from middleware.plugin.capabilities import SpillStore
from middleware.plugin.context import Internal, StepContext
from middleware.plugin.host import PluginHost
from middleware.plugin.places import Place, StepSpec
from middleware.plugin.spill_guard import GuardedSpillStore
from middleware.policy import Policy, load_policy
from middleware.policy.reload import PolicyStatus, PolicyWatcher
from middleware.policy.settings import bind
from middleware.report import ProblemReport, Report, SealedBlock
from middleware.session.cold_cache import CacheLifetime, ColdRequest, RecordStore, SessionCache
from middleware.session.decisions import Decision, DecisionLedger
from middleware.session.resume import Continuations, Previous, Resume, copies
from middleware.spill import SpillSettings, open_store
from middleware.spill.remembered import RememberedStore
from middleware.view import Conversation, Node, ToolCall, ToolResult


@dataclass(frozen=True)
class ProcessResult:
    """What :meth:`Pipeline.process` returns."""

    #: The cleaned history: a new list in the input's wire format. Messages no step changed
    #: are the input's own objects, SDK objects included (treat them as read-only); changed
    #: ones are new plain dicts.
    messages: list[Any]
    report: Report
    #: What to send on, in the shape ``process()`` was given: the history list, or the
    #: request body with the cleaned history in it (every other field as it was).
    output: Any = None
    #: Whether the request continued the previous one of its conversation and was worked
    #: on in its new part only (:mod:`middleware.session.resume`); the output and the
    #: report are the same either way.
    continued: bool = False
    #: The marks of the input messages (:func:`~middleware.cache.messages.message_mark`:
    #: the length and hash of each one's exact copy), when the pipeline took them to
    #: recognise the request it continues; ``None`` otherwise.
    input_marks: tuple[int, ...] | None = None
    #: The history as the steps that repair it left it (pairing), when they changed it:
    #: what a provider would have been sent had only the repairs been made, which the
    #: proxy's ledger estimates the cost without the middleware from (``None``: they
    #: changed nothing).
    repaired: list[Any] | None = None
    #: The history as it came, parsed (before any step): what a host reads of the request
    #: itself without parsing it again (the read-backs it carries:
    #: :mod:`middleware.conversations.readbacks`).
    parsed: tuple[Node, ...] = ()

    @property
    def format(self) -> str:
        return self.report.format

    @property
    def changed(self) -> bool:
        return self.report.changed


@dataclass
class SessionParts:
    """What a pipeline keeps for its session between requests: the spill store and its
    readings, the frozen decisions, the prompt cache's clock and cold moves, and the
    requests the next may continue. Opened by whoever owns the session (a pipeline on
    its own, or a conversation's state: :mod:`middleware.conversations.state`), which
    also decides when they are forgotten and closed; the pipeline only uses them."""

    session_id: str
    #: Work reused between requests, which the decisions and the store's memory live in
    #: (shared with other sessions, or the session's own).
    cache: DerivedCache
    #: Where results cut from the context are kept in full: a plugin's store, guarded,
    #: or the session workspace, remembering what it saved (:mod:`.spill.remembered`).
    spill: SpillStore
    #: Budget decisions frozen per call id (see :mod:`middleware.session.decisions`).
    decisions: DecisionLedger
    #: The session's prompt cache as its requests and answers tell it, and the moves made
    #: when it was cold, recorded in the local workspace (see .session.cold_cache).
    prompt_cache: SessionCache
    #: The last request of each recent conversation, which the next may continue.
    continuations: Continuations
    #: Readings of result texts kept in the session's own local workspace (``None``:
    #: kept in memory only).
    readings: ReadingStore | None
    #: Problems of plugins met while opening them (providing the spill store).
    problems: tuple[ProblemReport, ...] = ()

    @classmethod
    def open(
        cls,
        policy: Policy,
        host: PluginHost,
        session_id: str,
        cache: DerivedCache,
        decisions: Iterable[Decision | Mapping[str, Any]] = (),
    ) -> SessionParts:
        """The parts of ``session_id`` under ``policy``: the spill store a plugin of
        ``host`` provides, else the session's workspace as ``spill`` says."""
        problems: list[ProblemReport] = []
        spill: SpillStore = host.spill_store(policy, session_id, problems) or RememberedStore(
            open_store(session_id, bind(policy, SpillSettings)), cache
        )
        store = spill.store if isinstance(spill, RememberedStore) else None
        return cls(
            session_id, cache, spill, DecisionLedger(decisions, cache=cache),
            SessionCache(store if isinstance(store, RecordStore) else None), Continuations(),
            store if isinstance(store, ReadingStore) else None, tuple(problems),
        )  # fmt: skip

    @property
    def unwrapped_spill(self) -> SpillStore:
        """The spill store a plugin provided, as it returned it, or the session workspace."""
        if isinstance(self.spill, (GuardedSpillStore, RememberedStore)):
            return self.spill.store
        return self.spill

    def sync(self) -> None:
        """Sync what the session workspace saved, if it syncs in batches."""
        if isinstance(self.spill, RememberedStore):
            self.spill.sync()

    @property
    def held_bytes(self) -> int:
        """Memory held between requests (an estimate: the recent requests the next may
        continue, the frozen decisions), which a session pool budgets."""
        return self.continuations.bytes + self.decisions.bytes

    def forget(self, *, cached: bool = False) -> None:
        """Drop what is held between requests (the spilled files and readings stay);
        ``cached``: what the cache keeps of the last messages goes too."""
        marks = self.continuations.clear()
        self.decisions.clear()
        if cached:
            forget_messages(self.cache, marks)

    def close(self, until: float | None = None) -> None:
        """Record when the session's last request was sent, for a later process (its
        lock waited for until ``until``, a ``time.monotonic()``, if given), and release
        the spill store."""
        self.prompt_cache.save(until=until)
        self.spill.close()


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
        parts: SessionParts | None = None,
    ) -> None:
        self._policy = policy
        self._host = host if host is not None else PluginHost.create()
        #: Whether :meth:`close` closes the session's parts: those this pipeline opened
        #: itself, not those of a conversation's state, which closes them.
        self._owns_parts = parts is None
        if parts is None:
            if cache is None:
                cache = DerivedCache(bind(policy, CacheSettings).max_bytes)
            session = session_id if session_id is not None else uuid.uuid4().hex[:12]
            parts = SessionParts.open(policy, self._host, session, cache, decisions)
        #: What the session keeps between requests (:class:`SessionParts`).
        self.parts = parts
        #: Work reused between requests (derived data of results, parsed messages): the
        #: given cache, shared with other pipelines, or one of the size the policy says.
        self.cache = parts.cache
        self.session_id = parts.session_id
        #: Problems of plugins met while setting up (loading, providing the spill store),
        #: repeated in every report: fixed here, so they never grow.
        setup = list(self._host.load_problems)
        setup += (problem for problem in parts.problems if problem not in setup)
        self._setup_problems = tuple(setup)
        #: The ``policy_reloaded`` failures of the last swap (in :attr:`policy_status`).
        self._reload_problems: tuple[ProblemReport, ...] = ()
        self._closed = False
        #: Calls of process() and admit_batch() running now; close() waits for them.
        self._active = 0
        self._idle = threading.Condition()
        self._watcher: PolicyWatcher | None = None

    @property
    def decisions(self) -> DecisionLedger:
        """Budget decisions frozen per call id (see :mod:`middleware.session.decisions`)."""
        return self.parts.decisions

    @property
    def prompt_cache(self) -> SessionCache:
        """The session's prompt cache as its requests and answers tell it, and the moves
        made when it was cold (see :mod:`middleware.session.cold_cache`)."""
        return self.parts.prompt_cache

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
        watcher = PolicyWatcher(policy, on_swap=lambda _: None)
        pipe = cls(
            watcher.policy, host=host, session_id=session_id, decisions=decisions, cache=cache
        )
        watcher.on_swap = pipe._swap
        pipe._watcher = watcher
        watcher.start()
        return pipe

    @property
    def policy_status(self) -> PolicyStatus:
        """Generation, digest and the last reload's outcome of the policy in effect: a
        rejected edit (``last_error``), the ``policy_reloaded`` implementations that failed
        after the last swap (``plugin_problems``)."""
        if self._watcher is not None:
            return replace(self._watcher.status, plugin_problems=self._reload_problems)
        return PolicyStatus(self._policy.source, 1, self._policy.digest)

    def reload_policy(self) -> bool:
        """Re-read a watched policy now (hosts that cannot wait for the watcher)."""
        if self._watcher is None:
            raise RuntimeError("this pipeline does not watch a policy file")
        return self._watcher.reload()

    def _swap(self, new: Policy) -> None:
        old, self._policy = self._policy, new  # one reference: process() never mixes
        problems: list[ProblemReport] = []
        self._host.policy_reloaded(old, new, problems)  # each failure is logged
        # The reload's outcome, not every later request's: in policy_status until the next
        # swap, never in process() reports.
        self._reload_problems = tuple(problems)

    def replace_policy(self, policy: Policy) -> None:
        """Use ``policy`` for the calls that start from now on (a host that reloads its
        policy itself, such as the proxy). Calls running keep the snapshot they started
        with; the spill store keeps the settings it was created with."""
        self._policy = policy

    @property
    def policy(self) -> Policy:
        """The policy snapshot new ``process()`` calls use."""
        return self._policy

    @property
    def host(self) -> PluginHost:
        return self._host

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
        with self._in_flight(), request_scope():
            policy = self._policy  # one snapshot for the whole call
            memo = MessageMemo(self.cache, bind(policy, CacheSettings).max_message_bytes)
            request = read_request(messages, format, continuation=continuation, known=memo.known)
            if request.text_input:  # a body whose history is plain text (Responses' input)
                assert request.body is not None  # only a body has a text history
                why = f"the request body's {request.body.key!r} text"
                report = Report(request.format, why, policy.name)
                return ProcessResult([], report, messages)
            cold = self.prompt_cache.request(bind(policy, CacheLifetime).seconds, now)
            result = self._process(policy, request, memo, cold)
            self.prompt_cache.made(cold)
            self.parts.sync()  # every file a preview names is on disk before it leaves
            restored, output = request.output(result.messages)
            return ProcessResult(
                restored, result.report, output, result.continued, result.input_marks,
                result.repaired,
                result.parsed,
            )  # fmt: skip

    def _process(
        self, policy: Policy, request: Request, memo: MessageMemo, cold: ColdRequest
    ) -> ProcessResult:
        messages, format = request.history, request.format
        if format == "auto":
            detection = detect_format(messages)
            fmt, why = detection.format, detection.evidence or "ambiguous"
        else:
            fmt, why = format, request.format_source or "given"
        codec = get_codec(fmt)
        conversation = codec.parse(messages, text_protocol_rule(policy), memo)
        report = Report(
            format=fmt, format_source=why, policy=policy.name,
            text_protocol=conversation.text_protocol, messages_before=len(messages),
        )  # fmt: skip
        report.result_chars_before = _results(conversation)[1]
        report.sealed.extend(_sealed(conversation))
        report.problems.extend(self._setup_problems)

        parsed = conversation.checkpoint()
        shared: dict[str, Any] = {}
        # The steps placed first repair the history, in full on every request; the later
        # ones may continue the previous request when the repair changed nothing.
        first = [step for step in self._host.steps if step.place is Place.FIRST]
        later = [step for step in self._host.steps if step.place is not Place.FIRST]
        runs = [
            self._run_step(step, policy, codec, conversation, request, shared, cold=cold)
            for step in first
        ]
        # What a request that continues the previous one takes from it (see .session.resume).
        keys = memo.keys(messages) if self._continues(codec, request) else None
        marks = tuple(map(message_mark, keys)) if keys else None
        repaired = len(conversation.nodes) != len(parsed) or any(
            a is not b for a, b in zip(conversation.nodes, parsed, strict=True)
        )
        after_repairs = codec.render(conversation) if repaired else None
        reading = (Identity(policy), fmt, conversation.text_protocol)
        previous = None
        if marks and not repaired and not any(run.problems for run in runs):
            resumed: dict[str, Any] = {}  # the later steps' own: discarded if refused

            def run_resumed(step: StepSpec, resume: Resume) -> Internal:
                return self._run_step(
                    step, policy, codec, conversation, request, resumed, resume, cold=cold
                )

            previous = self.parts.continuations.run(
                conversation, marks, reading=reading, decisions=len(self.decisions),
                steps=later, run_step=run_resumed,
            )  # fmt: skip
        if previous is None:
            runs += [
                self._run_step(s, policy, codec, conversation, request, shared, cold=cold)
                for s in later
            ]
        else:
            runs += previous
        for run in runs:
            report.actions.extend(run.actions)
            # One line per problem: the same plugin failing alike in two steps is one problem.
            report.problems.extend(p for p in run.problems if p not in report.problems)
        # What each step left for the next request; none left anything: nothing to continue.
        carried = {run.step: run.carry for run in runs if run.carry is not None}
        failed = any(run.problems for run in runs)
        if marks and not repaired and carried and not failed:
            self.parts.continuations.remember(Previous(
                reading, marks, tuple(conversation.nodes),
                {run.step: copies(run.actions) for run in runs}, carried, len(self.decisions),
            ), parsed)  # fmt: skip

        report.loop_alerts.extend(self._host.loop_alerts(conversation, policy, report.problems))
        out = codec.render(conversation) if conversation.changed else list(messages)
        report.messages_after = len(out)
        report.tool_results, report.result_chars_after = _results(conversation)
        return ProcessResult(out, report, out, previous is not None, marks, after_repairs, parsed)

    def _run_step(  # noqa: PLR0917 (the parts of one process() call)
        self, step: StepSpec, policy: Policy, codec: Codec, conversation: Conversation,
        request: Request, shared: dict[str, Any], resume: Resume | None = None,
        *, cold: ColdRequest | None = None,
    ) -> Internal:  # fmt: skip
        """Run one step hook on ``conversation``: what the run did and left."""
        context = self._context(
            step, policy, codec, shared, cold=cold, continuation=request.continuation, resume=resume
        )
        self._host.run_step(step, conversation, context)
        return context.internal

    def _continues(self, codec: Codec, request: Request) -> bool:
        """Whether this request may continue the previous one of its conversation, or be
        continued: only built-in steps and summaries, on the pipeline's own store, in a
        format whose turns are messages (a history with reasoning items is always laid
        out again in full)."""
        return (
            not codec.reasoning_items
            and not request.continuation
            and self.cache.enabled
            and isinstance(self.parts.spill, RememberedStore)
            and not self._host.decides_old_turns()
        )

    @property
    def continued(self) -> int:
        """Requests that continued the previous request of their conversation and were
        worked on in their new part only (:mod:`middleware.session.resume`)."""
        return self.parts.continuations.continued

    @property
    def held_bytes(self) -> int:
        """Memory the session's state holds between requests (an estimate: the recent
        requests it may continue, its frozen decisions), which a session pool budgets."""
        return self.parts.held_bytes

    def forget(self, *, cached: bool = False) -> None:
        """Drop the session's state held between requests: the next request is processed
        as a restarted process would (the spilled files and readings are found again;
        decisions, admitted ones too, are made again). ``cached``: what the cache keeps of
        its last messages goes too (an ended session)."""
        self.parts.forget(cached=cached)

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
        with self._in_flight():
            return self._admit_batch(outputs, parallel_calls, context_chars)

    def _admit_batch(
        self, outputs: Sequence[ToolOutput], parallel_calls: int | None, context_chars: int | None
    ) -> list[Admission]:
        calls = len(outputs) if parallel_calls is None else parallel_calls
        check_batch(outputs, calls, context_chars)
        conversation = batch_conversation(outputs)
        context = self._dispatch_context()
        self._host.admit_outputs(conversation, calls, context_chars, context)
        admitted = []
        for item, result in zip(outputs, conversation.nodes[1].results, strict=True):
            self.decisions.record(item.tool_use_id, item.output, result.text, "admit")
            budget = self.result_budget(
                item.tool_name, parallel_calls=calls, context_chars=context_chars
            )
            run = context.internal
            actions = tuple(a for a in run.actions if a.tool_call_id == item.tool_use_id)
            admitted.append(Admission(result.text, budget, actions, tuple(run.problems)))
        return admitted

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
        context = self._dispatch_context()
        cap = self._host.result_cap(tool_name, parallel_calls, context_chars, context)
        return cap if cap is not None else Cap(None, "no plugin bounds results (budget blocked)")

    def _dispatch_context(self) -> StepContext:
        """The context of a hook called at dispatch, before any request: the admission
        step's, in the format of the turn it admits (:data:`.DISPATCH_FORMAT`)."""
        return self._context(self._host.admission, self._policy, get_codec(DISPATCH_FORMAT), {})

    def _context(
        self,
        step: StepSpec,
        policy: Policy,
        codec: Codec,
        shared: dict[str, Any],
        *,
        cold: ColdRequest | None = None,
        continuation: bool = False,
        resume: Resume | None = None,
    ) -> StepContext:
        internal = Internal(
            step.name, self._host, continuation,
            decisions=self.decisions, cold_cache=cold, resume=resume, cache=self.cache,
            readings=self.parts.readings,
        )  # fmt: skip
        return StepContext(
            policy, codec, self.session_id, self.parts.spill, shared, internal=internal
        )

    @property
    def spill(self) -> SpillStore:
        """Where results cut from the context are kept in full: the store a plugin
        provided, as it returned it (the steps use it guarded), or the session workspace."""
        return self.parts.unwrapped_spill

    @contextmanager
    def _in_flight(self) -> Iterator[None]:
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

    def close(self) -> None:
        """Refuse new ``process()`` calls, wait for those running to finish, then release
        the session's spill workspace (unless the session's parts are a conversation's
        state's, which releases them: :mod:`middleware.conversations.state`)."""
        with self._idle:
            if self._closed:
                return
            self._closed = True
            self._idle.wait_for(lambda: self._active == 0)
        if self._watcher is not None:
            self._watcher.stop()
        if self._owns_parts:
            self.parts.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _sealed(conversation: Conversation) -> Iterator[SealedBlock]:
    for node in conversation.nodes:
        for block in node.blocks:
            if isinstance(block, ToolCall) and block.sealed:
                yield SealedBlock(node.origin, "tool_call", block.id)
            elif isinstance(block, ToolResult) and block.sealed:
                yield SealedBlock(node.origin, "tool_result", block.call_id)


def _results(conversation: Conversation) -> tuple[int, int]:
    """How many tool results ``conversation`` holds, and their characters."""
    count = chars = 0
    for node in conversation.nodes:
        for result in node.results:
            count += 1
            chars += result.chars
    return count, chars
