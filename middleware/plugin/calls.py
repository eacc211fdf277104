"""Calling the hooks: a typed facade over pluggy that runs every implementation isolated.

pluggy calls implementations last-registered-first and stops a hook call at the first
exception; both would let a third-party plugin reorder or kill the pipeline. The host
therefore never calls pluggy's untyped relay: it calls each implementation on its own, in
pluggy's order (``tryfirst``/``trylast`` honoured), so a failing plugin is reported and
skipped, never fatal. ``CHATCLI_TRACE_HOOKS=1`` logs every implementation call (plugin,
hook, duration).

The built-in implementations are ours: they run inline, and only an ``Exception`` of
theirs is a failure. A third-party implementation runs on a worker thread under the
policy's ``plugins.time_limit_seconds`` (:mod:`middleware.plugin.runner`); whatever it
raises (``SystemExit`` and ``KeyboardInterrupt`` included: no real signal lands on a
worker thread) is its failure. The capabilities called for a first answer are one call
over the rows of :mod:`.first_results`; the step hooks are run by :mod:`.step_calls`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

from middleware.errors import PluginError
from middleware.plugin.context import StepContext, adopt, fork
from middleware.plugin.failures import logger, report_error, report_late, report_wrong_type
from middleware.plugin.first_results import (
    COMPACT_BEFORE_SPILL,
    COUNT_TOKENS,
    DETECT_CONTENT_TYPE,
    RESULT_CAP,
    SPILL_STORE,
    SUMMARIZE_RESULT,
    TOOL_FILE_ACCESS,
    TOOL_RESULT_CAP,
    FirstResult,
)
from middleware.plugin.runner import TimeLimits
from middleware.plugin.settings import time_limit
from middleware.plugin.spill_guard import GuardedSpillStore

if TYPE_CHECKING:
    from middleware.plugin.admission import Cap
    from middleware.plugin.capabilities import DeclaredCap, FileAccess
    from middleware.policy import Policy
    from middleware.report import ProblemReport
    from middleware.view import ConversationIndex

T = TypeVar("T")

#: Where hook calls are traced (INFO; a handler on stderr is added if none is configured).
trace_logger = logging.getLogger("middleware.plugin.trace")


class HookCalls:
    """Calls the hooks of the plugins ``pm`` holds, each implementation isolated: those of
    the ``builtin`` plugins inline, the others under the time limit."""

    def __init__(self, pm: pluggy.PluginManager, builtin: set[str], *, trace: bool) -> None:
        self._pm = pm
        self._builtin = builtin
        self._trace = trace
        #: Third-party calls run under a time limit; the built-in ones run inline.
        self._limits = TimeLimits()
        self._default_limit = time_limit(None)

    # -- capabilities --------------------------------------------------------------------

    def first_answer(
        self,
        capability: FirstResult[T],
        arguments: Mapping[str, Any],
        problems: list[ProblemReport],
        *,
        limit: float | None,
        log: bool = True,
    ) -> T | None:
        """The first answer to ``capability`` that is not ``None`` and that its row takes,
        in pluggy's order; ``None`` when none is. An implementation that raises, answers
        what the row does not take, or (third-party) does not answer within ``limit``
        seconds is reported in ``problems`` (logged unless ``log`` is false) and counts
        as no answer."""
        hook = capability.hook
        for impl in self._ordered_impls(hook):
            plugin = impl.plugin_name
            forked = None
            if capability.forks_context and plugin not in self._builtin:
                forked = fork(arguments["context"])
            work = arguments if forked is None else {**arguments, "context": forked}
            value = self._answer(
                impl, hook, work, problems, limit, late=capability.late, forked=forked, log=log
            )
            if value is None:
                continue
            taken = capability.take(value, plugin, arguments)
            if taken is None:
                report_wrong_type(problems, plugin, hook, capability.expected, value, log=log)
                continue
            if forked is not None:
                adopt(arguments["context"], forked)
            return taken
        return None

    def tool_result_cap(
        self, tool_name: str, problems: list[ProblemReport], *, policy: Policy | None = None
    ) -> DeclaredCap | None:
        """The first cap a plugin declares for ``tool_name``. Every capability method takes
        the ``policy`` of the call (for the time limit; ``None``: the schema's default)."""
        arguments = {"tool_name": tool_name}
        return self.first_answer(TOOL_RESULT_CAP, arguments, problems, limit=self._limit(policy))

    def tool_file_access(
        self, tool_name: str, problems: list[ProblemReport], *, policy: Policy | None = None
    ) -> FileAccess | None:
        """The first declaration of what ``tool_name`` does with files."""
        arguments = {"tool_name": tool_name}
        return self.first_answer(TOOL_FILE_ACCESS, arguments, problems, limit=self._limit(policy))

    def result_cap(
        self, tool_name: str, parallel_calls: int, context_chars: int | None, context: StepContext
    ) -> Cap | None:
        """The first plugin's answer to ``result_cap`` that is a :class:`Cap` (``None``:
        none answered, the budget step blocked). A wrong answer is reported."""
        arguments = {
            "tool_name": tool_name,
            "parallel_calls": parallel_calls,
            "context_chars": context_chars,
            "context": context,
        }
        limit = self._limit(context.policy)
        return self.first_answer(RESULT_CAP, arguments, context.internal.problems, limit=limit)

    def detect_content_type(
        self,
        text: str,
        tool_name: str | None,
        problems: list[ProblemReport],
        *,
        policy: Policy | None = None,
    ) -> str | None:
        """The first content type a plugin names for a result."""
        arguments = {"text": text, "tool_name": tool_name}
        limit = self._limit(policy)
        return self.first_answer(DETECT_CONTENT_TYPE, arguments, problems, limit=limit)

    def summarize_result(
        self,
        text: str,
        tool_name: str | None,
        content_type: str,
        path: str,
        problems: list[ProblemReport],
        *,
        policy: Policy | None = None,
    ) -> str | None:
        """The first summary a plugin writes of an old result, naming ``path``."""
        arguments = {
            "text": text,
            "tool_name": tool_name,
            "content_type": content_type,
            "path": path,
        }
        limit = self._limit(policy)
        return self.first_answer(SUMMARIZE_RESULT, arguments, problems, limit=limit)

    def compact_before_spill(
        self, index: ConversationIndex, before_turn: int, context: StepContext
    ) -> int | None:
        """The characters the first plugin that answers promises its compaction will take
        off the history (results of turns before ``before_turn``, later in this call);
        ``None`` when none does, the microcompaction step blocked for one: the budget step
        then counts the history as it is. An answer that is not an ``int`` of at least 0
        is reported and counts as none.

        The implementation keeps its promise through ``context.shared``: a third-party one
        works on a :func:`~middleware.plugin.context.fork` of ``context``, taken over only
        if it answered in time with a count, so a late one touches nothing the request
        uses."""
        arguments = {"index": index, "before_turn": before_turn, "context": context}
        problems, limit = context.internal.problems, self._limit(context.policy)
        return self.first_answer(COMPACT_BEFORE_SPILL, arguments, problems, limit=limit)

    def spill_store(
        self, policy: Policy, session_id: str, problems: list[ProblemReport]
    ) -> GuardedSpillStore | None:
        """The store the first plugin that provides one returned, guarded: its failures are
        reported as that plugin's, never the caller's (:mod:`middleware.plugin.spill_guard`)."""
        arguments = {"policy": policy, "session_id": session_id}
        found = self.first_answer(SPILL_STORE, arguments, problems, limit=self._limit(policy))
        if found is None:
            return None
        limit = time_limit(policy)
        return GuardedSpillStore(found.store, found.plugin, limits=self._limits, time_limit=limit)

    def token_counter(
        self, fallback: Callable[[str], int], *, policy: Policy | None = None
    ) -> Callable[[str], int]:
        """A token counter from the first plugin implementing ``count_tokens``, or
        ``fallback`` itself when none does. A plugin that fails or answers a wrong type (or
        passes the time limit of ``policy``, if one is given: counting is offline work) is
        reported once (logged, and kept in the counter's ``problems``) and ``fallback``
        counts instead; it is still asked for the next text."""
        if not self._ordered_impls(COUNT_TOKENS.hook):
            return fallback
        return TokenCounter(self, fallback, policy)

    def policy_reloaded(self, old: Policy, new: Policy, problems: list[ProblemReport]) -> None:
        """Notify every implementation (under ``new``'s time limit); failures go to
        ``problems``."""
        arguments = {"old": old, "new": new}
        for impl in self._ordered_impls("policy_reloaded"):
            # a notification: what an implementation returns means nothing
            self._answer(impl, "policy_reloaded", arguments, problems, self._limit(new))

    # -- one implementation --------------------------------------------------------------

    def _ordered_impls(self, hook_name: str) -> list[pluggy.HookImpl]:
        caller: pluggy.HookCaller = getattr(self._pm.hook, hook_name)
        # pluggy keeps implementations in reverse call order (tryfirst last).
        return list(reversed(caller.get_hookimpls()))

    def _answer(
        self,
        impl: pluggy.HookImpl,
        hook: str,
        arguments: Mapping[str, Any],
        problems: list[ProblemReport],
        limit: float | None,
        *,
        late: str = "counted as no answer",
        forked: StepContext | None = None,
        log: bool = True,
    ) -> Any:
        """What the implementation returned, or ``None`` when it raised or (third-party)
        did not answer within ``limit`` seconds: reported, a late one as counted ``late``.
        A third-party one given ``forked``, a :func:`fork` of the call's context, has the
        problems it reported there taken over once it finished."""
        plugin = impl.plugin_name
        if plugin in self._builtin:
            try:
                return self._call(impl, hook, arguments)
            except Exception as exc:
                report_error(problems, plugin, hook, exc, log=log)
                return None
        call = partial(self._call, impl, hook, arguments)
        outcome = self._limits.run((plugin, hook), call, limit)
        if not outcome.finished:
            skipped = outcome.skipped
            report_late(
                problems, plugin, hook, limit=limit, skipped=skipped, consequence=late, log=log
            )
            return None
        if forked is not None:
            problems.extend(p for p in forked.internal.problems if p not in problems)
        if outcome.error is not None:
            report_error(problems, plugin, hook, outcome.error, log=log)
            return None
        return outcome.value

    def _call(self, impl: pluggy.HookImpl, hook_name: str, kwargs: Mapping[str, Any]) -> Any:
        """Call one implementation with the arguments it asks for (traced if enabled)."""
        function: Callable[..., Any] = impl.function
        arguments = {arg: kwargs[arg] for arg in impl.argnames}
        if not self._trace:
            return function(**arguments)
        start = time.perf_counter()
        outcome = "raised"
        try:
            value = function(**arguments)
            outcome = "returned None" if value is None else f"returned {type(value).__name__}"
            return value
        finally:
            elapsed = (time.perf_counter() - start) * 1000
            trace_logger.info("%s: %s %s in %.3f ms", impl.plugin_name, hook_name, outcome, elapsed)

    def _limit(self, policy: Policy | None) -> float | None:
        """The time limit of a call under ``policy`` (``None``: the schema's default)."""
        return self._default_limit if policy is None else time_limit(policy)


class TokenCounter:
    """Counts tokens with the ``count_tokens`` plugins, ``fallback`` when none answers.

    A simulation counts thousands of texts: a broken tokenizer plugin is reported (logged
    and kept in :attr:`problems`) the first time it fails, not on every call.
    """

    def __init__(
        self, host: HookCalls, fallback: Callable[[str], int], policy: Policy | None = None
    ) -> None:
        self._host = host
        self._fallback = fallback
        # Counting is offline work (simulate, benchmarks), not a request: no time limit
        # unless a policy is given (a tokenizer's first call may load its tables for long).
        self._time_limit = None if policy is None else time_limit(policy)
        self._lock = threading.Lock()
        #: The first problem of each plugin that failed.
        self.problems: list[ProblemReport] = []

    def __call__(self, text: str) -> int:
        problems: list[ProblemReport] = []
        answer = self._host.first_answer(
            COUNT_TOKENS, {"text": text}, problems, limit=self._time_limit, log=False
        )
        for problem in problems:
            self._report_once(problem)
        return self._fallback(text) if answer is None else answer

    def _report_once(self, problem: ProblemReport) -> None:
        with self._lock:
            if any(p.plugin == problem.plugin for p in self.problems):
                return
            self.problems.append(problem)
        error = PluginError(problem.plugin, problem.hook, problem.message)
        logger.error("%s (reported once; the fallback counts when it fails)", error)
