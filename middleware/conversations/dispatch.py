"""Tool results bounded at dispatch time, before they enter a conversation's history: the
budget step runs on them as it would at request time, and its decisions are frozen in
the conversation's state, so the request that brings them back leaves them as admitted.
"""

from __future__ import annotations

from collections.abc import Sequence

from middleware.conversations.engine import step_context
from middleware.conversations.state import ConversationState
from middleware.formats import get_codec
from middleware.plugin.admission import (
    DISPATCH_FORMAT,
    Admission,
    Cap,
    ToolOutput,
    batch_conversation,
    check_batch,
)
from middleware.plugin.context import StepContext


def admit_batch(
    state: ConversationState,
    outputs: Sequence[ToolOutput],
    parallel_calls: int | None,
    context_chars: int | None,
) -> list[Admission]:
    """Bound ``outputs``, dispatched together, as :meth:`.Pipeline.admit_batch` says."""
    with state.running():
        calls = len(outputs) if parallel_calls is None else parallel_calls
        check_batch(outputs, calls, context_chars)
        conversation = batch_conversation(outputs)
        context = _dispatch_context(state)
        state.host.admit_outputs(conversation, calls, context_chars, context)
        admitted = []
        for item, result in zip(outputs, conversation.nodes[1].results, strict=True):
            state.decisions.record(item.tool_use_id, item.output, result.text, "admit")
            budget = result_cap(
                state, item.tool_name, parallel_calls=calls, context_chars=context_chars
            ).max_chars
            run = context.internal
            actions = tuple(a for a in run.actions if a.tool_call_id == item.tool_use_id)
            admitted.append(Admission(result.text, budget, actions, tuple(run.problems)))
        return admitted


def result_cap(
    state: ConversationState,
    tool_name: str,
    *,
    parallel_calls: int = 1,
    context_chars: int | None = None,
) -> Cap:
    """The characters one result of ``tool_name`` may keep, and where that comes from, as
    :meth:`.Pipeline.result_cap` says."""
    context = _dispatch_context(state)
    cap = state.host.result_cap(tool_name, parallel_calls, context_chars, context)
    return cap if cap is not None else Cap(None, "no plugin bounds results (budget blocked)")


def _dispatch_context(state: ConversationState) -> StepContext:
    """The context of a hook called at dispatch, before any request: the admission
    step's, in the format of the turn it admits (:data:`.DISPATCH_FORMAT`)."""
    admission = state.host.admission
    return step_context(state, admission, state.policy, get_codec(DISPATCH_FORMAT), {})
