"""Running the hooks that edit the conversation: the steps, admission and the loop guard.

The host calls the step hooks itself, in the order of the places their specifications
declare (:data:`STEPS`), each implementation isolated: a built-in one edits the
conversation in place and is rolled back if it fails; a third-party one works on copies of
the conversation and the context that are adopted only if it finished in time and left
something the wire format's codec can write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from middleware.errors import LoopGuardError
from middleware.plugin import hookspecs
from middleware.plugin.calls import HookCalls
from middleware.plugin.context import adopt, fork
from middleware.plugin.failures import report_error, report_late, report_wrong_type
from middleware.plugin.places import Place, StepSpec, steps_of
from middleware.plugin.settings import time_limit
from middleware.report import LoopAlert

if TYPE_CHECKING:
    import pluggy

    from middleware.formats.base import Codec
    from middleware.plugin.context import StepContext
    from middleware.policy import Policy
    from middleware.report import ProblemReport
    from middleware.view import Conversation, Node

#: The step hooks of a request, in the order of the places their specifications declare.
STEPS: tuple[StepSpec, ...] = tuple(
    spec for spec in steps_of(hookspecs) if spec.place is not Place.DISPATCH
)
#: The step hook a host's admission of tool outputs runs (``Pipeline.admit``).
(ADMISSION,) = (spec for spec in steps_of(hookspecs) if spec.place is Place.DISPATCH)


class StepCalls(HookCalls):
    """Runs the step hooks, admission and the loop guard's hook, each implementation
    isolated, its edits of the conversation kept only if it succeeded."""

    @property
    def steps(self) -> tuple[StepSpec, ...]:
        """The step hooks of a request, in the order the host calls them."""
        return STEPS

    @property
    def admission(self) -> StepSpec:
        """The step hook that admits tool outputs at dispatch (:meth:`admit_outputs`)."""
        return ADMISSION

    def run_step(self, step: StepSpec, conversation: Conversation, context: StepContext) -> None:
        """Run every implementation of one step hook, isolated: one that raises, leaves
        something that cannot be written back, or (third-party) does not finish within the
        time limit changes nothing and is reported."""
        self._run_step(step.hook, conversation, context, {})

    def admit_outputs(
        self,
        conversation: Conversation,
        parallel_calls: int,
        context_chars: int | None,
        context: StepContext,
    ) -> None:
        """Run every implementation of ``admit_outputs`` on the outputs of calls dispatched
        together, isolated as a step's."""
        arguments = {"parallel_calls": parallel_calls, "context_chars": context_chars}
        self._run_step(ADMISSION.hook, conversation, context, arguments)

    def loop_alerts(
        self, conversation: Conversation, policy: Policy, problems: list[ProblemReport]
    ) -> list[LoopAlert]:
        """Every implementation's alerts, in order. One that fails (but with
        :class:`LoopGuardError`, which ends the turn as its policy says) has its edits of
        the history rolled back and is reported."""
        alerts: list[LoopAlert] = []
        arguments = {"conversation": conversation, "policy": policy}
        for impl in self._ordered_impls("loop_alerts"):
            snapshot = conversation.checkpoint()
            try:
                found = self._call(impl, "loop_alerts", arguments)
            except LoopGuardError:
                raise
            except Exception as exc:
                conversation.restore(snapshot)
                report_error(problems, impl.plugin_name, "loop_alerts", exc)
                continue
            if not isinstance(found, list) or not all(isinstance(a, LoopAlert) for a in found):
                conversation.restore(snapshot)
                expected = "a list of alerts"
                report_wrong_type(problems, impl.plugin_name, "loop_alerts", expected, found)
                continue
            alerts.extend(found)
        return alerts

    def _run_step(
        self,
        hook_name: str,
        conversation: Conversation,
        context: StepContext,
        arguments: Mapping[str, Any],
    ) -> None:
        for impl in self._ordered_impls(hook_name):
            if impl.plugin_name in self._builtin:
                self._step_inline(impl, hook_name, conversation, context, arguments)
            else:
                self._step_limited(impl, hook_name, conversation, context, arguments)

    def _step_inline(
        self,
        impl: pluggy.HookImpl,
        hook_name: str,
        conversation: Conversation,
        context: StepContext,
        arguments: Mapping[str, Any],
    ) -> None:
        """A built-in implementation edits the conversation in place (no copy, no thread:
        the usual case costs nothing); its edits are rolled back if it fails."""
        snapshot = conversation.checkpoint()
        recorded = len(context.internal.actions)
        kwargs = {"conversation": conversation, "context": context, **arguments}
        try:
            self._call(impl, hook_name, kwargs)
            check_edits(conversation, snapshot, context.codec)
        except Exception as exc:
            conversation.restore(snapshot)
            del context.internal.actions[recorded:]
            report_error(context.internal.problems, impl.plugin_name, hook_name, exc)

    def _step_limited(
        self,
        impl: pluggy.HookImpl,
        hook_name: str,
        conversation: Conversation,
        context: StepContext,
        arguments: Mapping[str, Any],
    ) -> None:
        """A third-party implementation works on its own copy of the conversation and of
        the context, on a worker thread; its result is adopted only if it finished within
        the time limit, without raising, and left something writable. A late one cannot
        be stopped: it finishes on its copies, which nobody reads."""
        snapshot = conversation.checkpoint()
        work = replace(conversation, nodes=list(snapshot))
        forked = fork(context)
        problems = context.internal.problems
        limit = time_limit(context.policy)
        kwargs = {"conversation": work, "context": forked, **arguments}
        call = partial(self._call, impl, hook_name, kwargs)
        plugin = impl.plugin_name
        outcome = self._limits.run((plugin, hook_name), call, limit)
        if not outcome.finished:
            discarded = "its edits are discarded"
            skipped = outcome.skipped
            report_late(
                problems, plugin, hook_name, limit=limit, skipped=skipped, consequence=discarded
            )
            return
        problems.extend(p for p in forked.internal.problems if p not in problems)
        error = outcome.error
        if error is None:
            try:
                check_edits(work, snapshot, context.codec)
            except TypeError as exc:
                error = exc
            else:
                conversation.nodes[:] = work.nodes
                adopt(context, forked)
                return
        report_error(problems, plugin, hook_name, error)


def check_edits(conversation: Conversation, before: tuple[Node, ...], codec: Codec) -> None:
    """Raise ``TypeError`` if what a step left since ``before`` cannot be written back: a
    field of the wrong type (:meth:`Conversation.check`), or a node the wire format's codec
    fails on (an OpenAI tool message without a result, two calls in one Responses item)."""
    for i, node in conversation.check(since=before):  # the nodes that are not in before
        if not (node.changed or node.raw is None):
            continue  # written back as the wire object it came from
        try:
            codec.render_node(node)
        except Exception as exc:
            raise TypeError(
                f"conversation.nodes[{i}] cannot be written as {codec.name}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
