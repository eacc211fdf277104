"""The engine: one request of a conversation, cleaned. Parse its history, run the steps in
their places over it with what the conversation keeps (:class:`.ConversationState`), and
write it back.

What the engine keeps is nothing: every part that lives between requests is the state's,
and the policy of the call is the state's snapshot, read once. The proxy's cleaning
(:mod:`.cleaning`) and :class:`~middleware.Pipeline` both call :func:`process`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from middleware.cache import CacheSettings, Identity
from middleware.cache.digests import request_scope
from middleware.cache.messages import MessageMemo, message_mark
from middleware.conversations.state import ConversationState
from middleware.formats import detect_format, get_codec
from middleware.formats.base import Codec
from middleware.formats.requests import Request, read_request
from middleware.formats.text_protocol import text_protocol_rule
from middleware.plugin.context import Internal, StepContext, bound_store
from middleware.plugin.host import PluginHost
from middleware.plugin.places import Place, StepSpec
from middleware.policy import Policy
from middleware.policy.settings import bind
from middleware.report import Report, SealedBlock
from middleware.session.cold_cache import CacheLifetime, ColdRequest
from middleware.session.previous import Previous
from middleware.session.resume import Resume, copies
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


def process(
    state: ConversationState,
    messages: Any,
    format: str | Codec = "auto",
    *,
    continuation: bool = False,
    now: float | None = None,
) -> ProcessResult:
    """Run the steps on ``messages``, one request of ``state``'s conversation, as
    :meth:`.Pipeline.process` says (its parameters are the same; ``format`` may be the
    codec itself, which a host holds: then no format is looked up by name), or on a
    :class:`~middleware.formats.requests.Request` its host read already, with its codec
    (the proxy reads a body once: :func:`~middleware.formats.requests.wire_request`;
    ``format`` and ``continuation`` are then the request's own)."""
    with state.running(), request_scope():
        policy = state.policy  # one snapshot for the whole call
        memo = MessageMemo(state.cache, bind(policy, CacheSettings).max_message_bytes)
        if isinstance(messages, Request):
            request = messages
            memo.known(request.history)  # one cache lookup for the messages seen before
            given = request.body.document if request.body is not None else request.originals
        else:
            request = read_request(messages, format, continuation=continuation, known=memo.known)
            given = messages
        return _run(state, policy, request, memo, now=now, given=given)


def _run(
    state: ConversationState,
    policy: Policy,
    request: Request,
    memo: MessageMemo,
    *,
    now: float | None,
    given: Any,
) -> ProcessResult:
    """One read request of ``state``'s conversation through the steps (``given``: what
    the caller handed over, returned as it is for a history of plain text)."""
    if request.text_input:  # a body whose history is plain text (Responses' input)
        assert request.body is not None  # only a body has a text history
        why = f"the request body's {request.body.key!r} text"
        report = Report(request.format, why, policy.name)
        return ProcessResult([], report, given)
    cold = state.prompt_cache.request(bind(policy, CacheLifetime).seconds, now)
    result = _process(state, policy, request, memo, cold)
    state.prompt_cache.made(cold)
    state.spill.sync()  # every file a preview names is on disk before it leaves
    restored, output = request.output(result.messages)
    return ProcessResult(
        restored, result.report, output, result.continued, result.input_marks,
        result.repaired, result.parsed,
    )  # fmt: skip


def step_context(
    state: ConversationState,
    step: StepSpec,
    policy: Policy,
    codec: Codec,
    shared: dict[str, Any],
    *,
    cold: ColdRequest | None = None,
    continuation: bool = False,
    resume: Resume | None = None,
) -> StepContext:
    """The context one run of ``step`` is given in ``state``'s conversation."""
    internal = Internal(
        step.name, state.host, continuation,
        decisions=state.decisions, cold_cache=cold, resume=resume, cache=state.cache,
        readings=state.readings, store=state.spill,
    )  # fmt: skip
    spill = bound_store(internal, policy) or state.spill
    return StepContext(policy, codec, state.session, spill, shared, internal=internal)


@dataclass(frozen=True)
class _Call:
    """One request's parts, which every step's run of it shares."""

    state: ConversationState
    host: PluginHost
    policy: Policy
    codec: Codec
    conversation: Conversation
    request: Request
    cold: ColdRequest

    def run(self, step: StepSpec, shared: dict[str, Any], resume: Resume | None = None) -> Internal:
        """Run one step hook on the conversation: what the run did and left."""
        context = step_context(
            self.state, step, self.policy, self.codec, shared, cold=self.cold,
            continuation=self.request.continuation, resume=resume,
        )  # fmt: skip
        self.host.run_step(step, self.conversation, context)
        return context.internal


def _process(
    state: ConversationState,
    policy: Policy,
    request: Request,
    memo: MessageMemo,
    cold: ColdRequest,
) -> ProcessResult:
    messages, format = request.history, request.format
    if format == "auto":
        detection = detect_format(messages)
        fmt, why = detection.format, detection.evidence or "ambiguous"
    else:
        fmt, why = format, request.format_source or "given"
    codec = request.codec if request.codec is not None else get_codec(fmt)
    conversation = codec.parse(messages, text_protocol_rule(policy), memo)
    report = Report(
        format=fmt, format_source=why, policy=policy.name,
        text_protocol=conversation.text_protocol, messages_before=len(messages),
    )  # fmt: skip
    report.result_chars_before = _results(conversation)[1]
    report.sealed.extend(_sealed(conversation))
    report.problems.extend(state.problems)

    host = state.host
    call = _Call(state, host, policy, codec, conversation, request, cold)
    parsed = conversation.checkpoint()
    shared: dict[str, Any] = {}
    # The steps placed first repair the history, in full on every request; the later
    # ones may continue the previous request when the repair changed nothing.
    first = [step for step in host.steps if step.place is Place.FIRST]
    later = [step for step in host.steps if step.place is not Place.FIRST]
    runs = [call.run(step, shared) for step in first]
    # What a request that continues the previous one takes from it (see .session.resume).
    keys = memo.keys(messages) if _continues(state, codec, request) else None
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
            return call.run(step, resumed, resume)

        previous = state.continuations.run(
            conversation, marks, reading=reading, decisions=len(state.decisions),
            steps=later, run_step=run_resumed,
        )  # fmt: skip
    if previous is None:
        runs += [call.run(step, shared) for step in later]
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
        state.continuations.remember(Previous(
            reading, marks, tuple(conversation.nodes),
            {run.step: copies(run.actions) for run in runs}, carried, len(state.decisions),
        ), parsed)  # fmt: skip

    report.loop_alerts.extend(host.loop_alerts(conversation, policy, report.problems))
    out = codec.render(conversation) if conversation.changed else list(messages)
    report.messages_after = len(out)
    report.tool_results, report.result_chars_after = _results(conversation)
    return ProcessResult(out, report, out, previous is not None, marks, after_repairs, parsed)


def _continues(state: ConversationState, codec: Codec, request: Request) -> bool:
    """Whether this request may continue the previous one of its conversation, or be
    continued: only built-in steps and summaries, on the conversation's own store (one
    that remembers what it saved), in a format whose turns are messages (a history with
    reasoning items is always laid out again in full)."""
    return (
        not codec.reasoning_items
        and not request.continuation
        and state.cache.enabled
        and state.spill.token is not None
        and not state.host.decides_old_turns()
    )


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
