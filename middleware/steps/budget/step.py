"""Step 2, budget enforcement: per-tool, per-result and per-turn caps.

A result over its cap is saved whole to the session's spill store and replaced by a
preview that says where the full text is. Decisions depend only on the result, its turn
and the policy, so the same history always gives the same bytes (prompt-cache stability),
and a preview is recognised as one, so processing the output again changes nothing.

When the context is tight, the step asks the ``compact_before_spill`` hook how much the
compaction of old results will give back before it lowers a new result's cap; it imports
no other step, and with no plugin answering (microcompaction blocked) its caps count the
history as it is, so they hold on their own.
"""

from __future__ import annotations

from middleware.plugin.admission import Cap
from middleware.plugin.context import StepContext
from middleware.plugin.markers import hookimpl
from middleware.policy.settings import bind
from middleware.steps.budget.run import BudgetRun, Dispatch
from middleware.steps.budget.settings import BudgetSettings, TurnLimits, resolve_cap
from middleware.view import Conversation


@hookimpl(tryfirst=True)
def result_cap(
    tool_name: str, parallel_calls: int, context_chars: int | None, context: StepContext
) -> Cap:
    """The cap a result of ``tool_name`` gets at dispatch time (``Pipeline.result_budget``)."""
    settings = bind(context.policy, BudgetSettings)
    if not settings.enabled:
        return Cap(None, "budget.enabled is false")
    limits = TurnLimits.of(settings, parallel_calls, context_chars)
    return limits.cap_for(resolve_cap(tool_name, settings, context))


@hookimpl(tryfirst=True)
def enforce_budget(conversation: Conversation, context: StepContext) -> None:
    settings = bind(context.policy, BudgetSettings)
    if settings.enabled:
        BudgetRun(settings, context, conversation).run()


@hookimpl(tryfirst=True)
def admit_outputs(
    conversation: Conversation, parallel_calls: int, context_chars: int | None, context: StepContext
) -> None:
    """The step at dispatch: the outputs of calls dispatched together, bounded as one turn
    (``Pipeline.admit``)."""
    settings = bind(context.policy, BudgetSettings)
    if settings.enabled:
        dispatch = Dispatch(parallel_calls, context_chars)
        BudgetRun(settings, context, conversation, dispatch).run()
