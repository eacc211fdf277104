"""The plugin host: a typed facade over pluggy that runs every hook implementation isolated.

pluggy calls implementations last-registered-first and stops a hook call at the first
exception; both would let a third-party plugin reorder or kill the pipeline. The host
therefore calls the step hooks itself, in the order of the places their specifications
declare (:data:`STEPS`), and calls each implementation on its own, in pluggy's order
(``tryfirst``/``trylast`` honoured), so a failing plugin is reported and skipped, never
fatal. Hook wrappers (``wrapper=True``,
``hookwrapper=True``) need pluggy's own call loop, which would give that isolation up: a
plugin that declares one is refused at registration, with the plugin and hook named.
``CHATCLI_TRACE_HOOKS=1`` logs every implementation call (plugin, hook, duration).

The built-in implementations are ours: they run inline, and only an ``Exception`` of
theirs is a failure. A third-party implementation runs on a worker thread under the
policy's ``plugins.time_limit_seconds`` (:mod:`middleware.plugin.runner`), a step
implementation on copies of the conversation and the context that are adopted only if it
finished in time; whatever it raises (``SystemExit`` and ``KeyboardInterrupt`` included:
no real signal lands on a worker thread) is its failure.
"""

from __future__ import annotations

import difflib
import importlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import partial
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

import pluggy

from middleware.errors import LoopGuardError, PluginError
from middleware.plugin import hookspecs
from middleware.plugin.admission import Cap
from middleware.plugin.capabilities import DeclaredCap, FileAccess, SpillStore, ToolCap
from middleware.plugin.context import adopt, fork
from middleware.plugin.places import Place, StepSpec, deciding_hooks, steps_of
from middleware.plugin.runner import TimeLimits
from middleware.plugin.settings import TIME_LIMIT_KEY, time_limit
from middleware.plugin.spill_guard import GuardedSpillStore
from middleware.report import LoopAlert, ProblemReport

if TYPE_CHECKING:
    from middleware.formats.base import Codec
    from middleware.plugin.context import StepContext
    from middleware.policy import Policy
    from middleware.view import Conversation, ConversationIndex, Node

logger = logging.getLogger(__name__)

#: The line a plugin's summary gets when it does not name the file its result is in.
FULL_OUTPUT = "Full output: {path}"
#: Entry-point group third-party plugins register under (PyPA: ``^\w+(\.\w+)*$``).
ENTRY_POINT_GROUP = "chatcli_middleware"

#: Built-in plugins, registered after entry points and marked to run first in each step.
DEFAULT_PLUGINS: tuple[str, ...] = (
    "middleware.steps.pairing",
    "middleware.steps.budget",
    "middleware.steps.microcompact",
    "middleware.steps.loop_guard",
    "middleware.default_plugins.chatcli_tools",
    "middleware.default_plugins.agent_tools",
)

#: The step hooks of a request, in the order of the places their specifications declare.
STEPS: tuple[StepSpec, ...] = tuple(
    spec for spec in steps_of(hookspecs) if spec.place is not Place.DISPATCH
)
#: The step hook a host's admission of tool outputs runs (``Pipeline.admit``).
(ADMISSION,) = (spec for spec in steps_of(hookspecs) if spec.place is Place.DISPATCH)
#: Hooks whose third-party implementations decide what old turns become.
DECIDING_HOOKS: tuple[str, ...] = deciding_hooks(hookspecs)

#: ``CHATCLI_LOAD_PLUGINS``: comma-separated entry-point names to load (empty: none).
LOAD_PLUGINS_ENV = "CHATCLI_LOAD_PLUGINS"
#: ``CHATCLI_BLOCK_PLUGINS``: comma-separated plugin names never to register.
BLOCK_PLUGINS_ENV = "CHATCLI_BLOCK_PLUGINS"
#: ``CHATCLI_TRACE_HOOKS``: ``1``/``true`` logs every hook implementation call.
TRACE_HOOKS_ENV = "CHATCLI_TRACE_HOOKS"

#: Where hook calls are traced (INFO; a handler on stderr is added if none is configured).
trace_logger = logging.getLogger("middleware.plugin.trace")


@dataclass(frozen=True)
class PluginInfo:
    """A registered plugin, for ``chatcli-mw plugins``."""

    name: str
    hooks: tuple[str, ...]
    builtin: bool
    distribution: str | None
    version: str | None


class PluginHost:
    """Owns a :class:`pluggy.PluginManager`; every hook call goes through a typed method."""

    def __init__(self, *, trace: bool = False) -> None:
        self._pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._trace = trace
        self._pm.add_hookspecs(hookspecs)
        self._builtin: set[str] = set()
        #: plugin name -> (distribution name, version), for entry-point plugins.
        self._distributions: dict[str, tuple[str, str]] = {}
        self.load_problems: list[ProblemReport] = []
        #: Third-party calls run under a time limit; the built-in ones run inline.
        self._limits = TimeLimits()
        self._default_limit = time_limit(None)

    @classmethod
    def create(
        cls,
        *,
        load_entrypoints: bool = True,
        env: Mapping[str, str] | None = None,
        builtins: Iterable[str] = DEFAULT_PLUGINS,
    ) -> PluginHost:
        """The usual host: third-party entry points (subject to the allow and block lists
        read from ``env``, default ``os.environ``), then the built-in plugins."""
        environ = os.environ if env is None else env
        host = cls(trace=_truthy(environ.get(TRACE_HOOKS_ENV, "")))
        if host._trace and not trace_logger.hasHandlers():
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("chatcli-mw hook trace: %(message)s"))
            trace_logger.addHandler(handler)
            trace_logger.setLevel(logging.INFO)
        for name in _split(environ.get(BLOCK_PLUGINS_ENV, "")):
            host._pm.set_blocked(name)
        if load_entrypoints:
            host._load_entrypoints(environ.get(LOAD_PLUGINS_ENV))
        for module_name in builtins:
            host.register(importlib.import_module(module_name), name=module_name, builtin=True)
        return host

    def register(self, plugin: object, name: str | None = None, *, builtin: bool = False) -> str:
        """Register a plugin object (module, class or instance) and return its name.

        :raises PluginError: the plugin implements a hook that does not exist, declares a
            hook wrapper, or does not match a hook's signature (nothing is registered).
        """
        try:
            registered = self._pm.register(plugin, name=name)
        except (pluggy.PluginValidationError, ValueError) as exc:
            raise PluginError(name or repr(plugin), "register", str(exc)) from exc
        if registered is None:  # blocked
            return name or self._pm.get_name(plugin) or repr(plugin)
        try:
            self._check_impls(plugin, registered)
        except PluginError:
            self._pm.unregister(plugin)
            raise
        if builtin:
            self._builtin.add(registered)
        return registered

    def _check_impls(self, plugin: object, name: str) -> None:
        for caller in self._pm.get_hookcallers(plugin) or []:
            for impl in caller.get_hookimpls():
                if impl.plugin is not plugin:
                    continue
                if impl.wrapper or impl.hookwrapper:
                    raise PluginError(
                        name,
                        caller.name,
                        "hook wrappers (wrapper=True / hookwrapper=True) are not supported: "
                        "the host runs every implementation on its own so that one failing "
                        "plugin cannot stop the others; implement the hook directly, and "
                        "order it with tryfirst=True or trylast=True",
                    )
                if not caller.has_spec() and not impl.optionalhook:
                    known = [n for n in dir(hookspecs) if _is_spec(getattr(hookspecs, n))]
                    close = difflib.get_close_matches(caller.name, known, n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else ""
                    raise PluginError(
                        name,
                        caller.name,
                        f"no such hook{hint} (the hooks are: {', '.join(sorted(known))})",
                    )

    def unregister(self, name: str) -> None:
        self._pm.unregister(name=name)

    def _load_entrypoints(self, allow: str | None) -> None:
        allowed = None if allow is None else set(_split(allow))
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if allowed is not None and ep.name not in allowed:
                continue
            if self._pm.is_blocked(ep.name) or self._pm.has_plugin(ep.name):
                continue
            try:
                plugin = ep.load()
                self.register(plugin, name=ep.name)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # sys.exit() at import included: not the host's end
                detail = (
                    exc.detail if isinstance(exc, PluginError) else f"{type(exc).__name__}: {exc}"
                )
                hook = exc.hook if isinstance(exc, PluginError) else "load"
                problem = ProblemReport(ep.name, hook, detail)
                self.load_problems.append(problem)
                logger.error("could not load plugin %r: %s", ep.name, problem.message)
                continue
            if ep.dist is not None:
                self._distributions[ep.name] = (ep.dist.name, ep.dist.version)

    # -- steps ---------------------------------------------------------------------------

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
            self._report(context.internal.problems, impl.plugin_name, hook_name, exc)

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
        outcome = self._limits.run((impl.plugin_name, hook_name), call, limit)
        if not outcome.finished:
            self._late(
                problems, impl.plugin_name, hook_name,
                limit=limit, skipped=outcome.skipped, consequence="its edits are discarded",
            )  # fmt: skip
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
        self._report(problems, impl.plugin_name, hook_name, error)

    # -- capabilities --------------------------------------------------------------------

    def tool_result_cap(
        self, tool_name: str, problems: list[ProblemReport], *, policy: Policy | None = None
    ) -> DeclaredCap | None:
        """The first cap a plugin declares for ``tool_name``. Every capability method takes
        the ``policy`` of the call (for the time limit; ``None``: the schema's default)."""
        for plugin_name, value in self._first_results(
            "tool_result_cap", {"tool_name": tool_name}, problems, self._limit(policy)
        ):
            if isinstance(value, ToolCap):
                return DeclaredCap(value, plugin_name)
            self._wrong_type(problems, plugin_name, "tool_result_cap", "a ToolCap", value)
        return None

    def tool_file_access(
        self, tool_name: str, problems: list[ProblemReport], *, policy: Policy | None = None
    ) -> FileAccess | None:
        """The first declaration of what ``tool_name`` does with files."""
        for plugin_name, value in self._first_results(
            "tool_file_access", {"tool_name": tool_name}, problems, self._limit(policy)
        ):
            if isinstance(value, FileAccess):
                return value
            self._wrong_type(problems, plugin_name, "tool_file_access", "a FileAccess", value)
        return None

    def result_cap(
        self, tool_name: str, parallel_calls: int, context_chars: int | None, context: StepContext
    ) -> Cap | None:
        """The first plugin's answer to ``result_cap`` that is a :class:`Cap` (``None``:
        none answered, the budget step blocked). A wrong answer is reported."""
        kwargs = {"tool_name": tool_name, "parallel_calls": parallel_calls,
                  "context_chars": context_chars, "context": context}  # fmt: skip
        limit = self._limit(context.policy)
        problems = context.internal.problems
        for plugin_name, value in self._first_results("result_cap", kwargs, problems, limit):
            if isinstance(value, Cap):
                return value
            self._wrong_type(problems, plugin_name, "result_cap", "a Cap", value)
        return None

    def loop_alerts(
        self, conversation: Conversation, policy: Policy, problems: list[ProblemReport]
    ) -> list[LoopAlert]:
        """Every implementation's alerts, in order. One that fails (but with
        :class:`LoopGuardError`, which ends the turn as its policy says) has its edits of
        the history rolled back and is reported."""
        alerts: list[LoopAlert] = []
        for impl in self._ordered_impls("loop_alerts"):
            snapshot = conversation.checkpoint()
            try:
                found = self._call(
                    impl, "loop_alerts", {"conversation": conversation, "policy": policy}
                )
            except LoopGuardError:
                raise
            except Exception as exc:
                conversation.restore(snapshot)
                self._report(problems, impl.plugin_name, "loop_alerts", exc)
                continue
            if not isinstance(found, list) or not all(isinstance(a, LoopAlert) for a in found):
                conversation.restore(snapshot)
                self._wrong_type(
                    problems, impl.plugin_name, "loop_alerts", "a list of alerts", found
                )
                continue
            alerts.extend(found)
        return alerts

    def implements(self, hook_name: str) -> bool:
        """Whether any plugin implements ``hook_name``: a step that would ask every
        result may work out once what it does when no plugin answers."""
        caller: pluggy.HookCaller = getattr(self._pm.hook, hook_name)
        return bool(caller.get_hookimpls())

    def extended(self, hook_name: str) -> bool:
        """Whether a plugin other than the built-in ones implements ``hook_name``."""
        caller: pluggy.HookCaller = getattr(self._pm.hook, hook_name)
        return any(impl.plugin_name not in self._builtin for impl in caller.get_hookimpls())

    def decides_old_turns(self) -> bool:
        """Whether a plugin other than the built-in ones implements a hook whose
        specification says it decides what old turns become (:data:`DECIDING_HOOKS`)."""
        return any(self.extended(hook) for hook in DECIDING_HOOKS)

    def detect_content_type(
        self, text: str, tool_name: str | None, problems: list[ProblemReport], *,
        policy: Policy | None = None,
    ) -> str | None:  # fmt: skip
        for plugin_name, value in self._first_results(
            "detect_content_type",
            {"text": text, "tool_name": tool_name},
            problems,
            self._limit(policy),
        ):
            if isinstance(value, str) and value:
                return value
            self._wrong_type(problems, plugin_name, "detect_content_type", "a string", value)
        return None

    def summarize_result(
        self, text: str, tool_name: str | None, content_type: str, path: str,
        problems: list[ProblemReport], *, policy: Policy | None = None,
    ) -> str | None:  # fmt: skip
        kwargs = {"text": text, "tool_name": tool_name, "content_type": content_type, "path": path}
        limit = self._limit(policy)
        for plugin_name, value in self._first_results("summarize_result", kwargs, problems, limit):
            if isinstance(value, str) and value:
                return value if path in value else f"{value}\n{FULL_OUTPUT.format(path=path)}"
            self._wrong_type(problems, plugin_name, "summarize_result", "a string", value)
        return None

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
        hook = "compact_before_spill"
        problems = context.internal.problems
        for impl in self._ordered_impls(hook):
            plugin = impl.plugin_name
            own = plugin in self._builtin
            work = context if own else fork(context)
            kwargs = {"index": index, "before_turn": before_turn, "context": work}
            if own:
                try:
                    value = self._call(impl, hook, kwargs)
                except Exception as exc:
                    self._report(problems, plugin, hook, exc)
                    continue
            else:
                limit = time_limit(context.policy)
                outcome = self._limits.run(
                    (plugin, hook), partial(self._call, impl, hook, kwargs), limit
                )
                if not outcome.finished:
                    self._late(
                        problems, plugin, hook, limit=limit, skipped=outcome.skipped,
                        consequence="counted as no promise",
                    )  # fmt: skip
                    continue
                problems.extend(p for p in work.internal.problems if p not in problems)
                if outcome.error is not None:
                    self._report(problems, plugin, hook, outcome.error)
                    continue
                value = outcome.value
            if value is None:
                continue
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                if not own:
                    adopt(context, work)
                return value
            self._wrong_type(problems, plugin, hook, "an int >= 0", value)
        return None

    def spill_store(
        self, policy: Policy, session_id: str, problems: list[ProblemReport]
    ) -> GuardedSpillStore | None:
        """The store the first plugin that provides one returned, guarded: its failures are
        reported as that plugin's, never the caller's (:mod:`middleware.plugin.spill_guard`)."""
        for plugin_name, value in self._first_results(
            "spill_store",
            {"policy": policy, "session_id": session_id},
            problems,
            self._limit(policy),
        ):
            if isinstance(value, SpillStore):
                return GuardedSpillStore(
                    value, plugin_name, limits=self._limits, time_limit=time_limit(policy)
                )
            self._wrong_type(problems, plugin_name, "spill_store", "a SpillStore", value)
        return None

    def token_counter(
        self, fallback: Callable[[str], int], *, policy: Policy | None = None
    ) -> Callable[[str], int]:
        """A token counter from the first plugin implementing ``count_tokens``, or
        ``fallback`` itself when none does. A plugin that fails or answers a wrong type (or
        passes the time limit of ``policy``, if one is given: counting is offline work) is
        reported once (logged, and kept in the counter's ``problems``) and ``fallback``
        counts instead; it is still asked for the next text."""
        if not self._ordered_impls("count_tokens"):
            return fallback
        return TokenCounter(self, fallback, policy)

    def policy_reloaded(self, old: Policy, new: Policy, problems: list[ProblemReport]) -> None:
        """Notify every implementation (under ``new``'s time limit); failures go to
        ``problems``."""
        kwargs = {"old": old, "new": new}
        for _ in self._first_results("policy_reloaded", kwargs, problems, self._limit(new)):
            pass  # a notification: what an implementation returns means nothing

    # -- introspection -------------------------------------------------------------------

    def plugins(self) -> list[PluginInfo]:
        """Every registered plugin with its hooks, sorted by name."""
        infos = []
        for name, plugin in self._pm.list_name_plugin():
            if plugin is None:  # a blocked name
                continue
            callers = self._pm.get_hookcallers(plugin) or []
            dist_name, version = self._distributions.get(name, (None, None))
            infos.append(
                PluginInfo(
                    name=name,
                    hooks=tuple(sorted(c.name for c in callers)),
                    builtin=name in self._builtin,
                    distribution=dist_name,
                    version=version,
                )
            )
        return sorted(infos, key=lambda info: info.name)

    # -- helpers -------------------------------------------------------------------------

    def _ordered_impls(self, hook_name: str) -> list[pluggy.HookImpl]:
        caller: pluggy.HookCaller = getattr(self._pm.hook, hook_name)
        # pluggy keeps implementations in reverse call order (tryfirst last).
        return list(reversed(caller.get_hookimpls()))

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

    def _first_results(
        self,
        hook_name: str,
        kwargs: dict[str, Any],
        problems: list[ProblemReport],
        limit: float | None,
        *,
        log: bool = True,
    ) -> Iterator[tuple[str, Any]]:
        """Each implementation's answer that is not ``None``, in pluggy's order. One that
        raises, or (third-party) does not answer within ``limit`` seconds, is reported and
        counts as no answer."""
        for impl in self._ordered_impls(hook_name):
            plugin = impl.plugin_name
            if plugin in self._builtin:
                try:
                    value = self._call(impl, hook_name, kwargs)
                except Exception as exc:
                    self._report(problems, plugin, hook_name, exc, log=log)
                    continue
            else:
                call = partial(self._call, impl, hook_name, kwargs)
                outcome = self._limits.run((plugin, hook_name), call, limit)
                if not outcome.finished:
                    self._late(
                        problems, plugin, hook_name, limit=limit, skipped=outcome.skipped,
                        consequence="counted as no answer", log=log,
                    )  # fmt: skip
                    continue
                if outcome.error is not None:
                    self._report(problems, plugin, hook_name, outcome.error, log=log)
                    continue
                value = outcome.value
            if value is not None:
                yield plugin, value

    def _limit(self, policy: Policy | None) -> float | None:
        """The time limit of a call under ``policy`` (``None``: the schema's default)."""
        return self._default_limit if policy is None else time_limit(policy)

    @staticmethod
    def _late(
        problems: list[ProblemReport],
        plugin: str,
        hook: str,
        *,
        limit: float | None,
        skipped: bool,
        consequence: str,
        log: bool = True,
    ) -> None:
        if skipped:
            what = "skipped: an earlier call is still running past the time limit"
        else:
            what = f"did not finish within the time limit of {_seconds(limit)}"
        detail = (
            f"{what} ({TIME_LIMIT_KEY}); {consequence}. Make the implementation faster, or "
            "raise the limit"
        )
        PluginHost._problem(problems, plugin, hook, detail, log=log)

    @staticmethod
    def _report(
        problems: list[ProblemReport],
        plugin: str,
        hook: str,
        exc: BaseException,
        *,
        log: bool = True,
    ) -> None:
        PluginHost._problem(problems, plugin, hook, f"{type(exc).__name__}: {exc}", exc, log=log)

    @staticmethod
    def _wrong_type(
        problems: list[ProblemReport],
        plugin: str,
        hook: str,
        expected: str,
        value: object,
        *,
        log: bool = True,
    ) -> None:
        detail = f"returned {type(value).__name__}, expected {expected}"
        PluginHost._problem(problems, plugin, hook, detail, log=log)

    @staticmethod
    def _problem(
        problems: list[ProblemReport],
        plugin: str,
        hook: str,
        detail: str,
        exc: BaseException | None = None,
        *,
        log: bool = True,
    ) -> None:
        """Report one failure: logged and added to ``problems``, once per list (a plugin
        failing on each of a hundred results is one problem of the request)."""
        error = PluginError(plugin, hook, detail)
        problem = ProblemReport(plugin, hook, error.detail)
        if problem in problems:
            return
        problems.append(problem)
        if log:
            logger.error("%s (default behaviour used)", error, exc_info=exc)


class TokenCounter:
    """Counts tokens with the ``count_tokens`` plugins, ``fallback`` when none answers.

    A simulation counts thousands of texts: a broken tokenizer plugin is reported (logged
    and kept in :attr:`problems`) the first time it fails, not on every call.
    """

    def __init__(
        self, host: PluginHost, fallback: Callable[[str], int], policy: Policy | None = None
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
        answer: int | None = None
        for plugin, value in self._host._first_results(
            "count_tokens", {"text": text}, problems, self._time_limit, log=False
        ):
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                answer = value
                break
            self._host._wrong_type(
                problems, plugin, "count_tokens", "an int >= 0", value, log=False
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


def _seconds(limit: float | None) -> str:
    return "no limit" if limit is None else f"{limit:g} s"


def _is_spec(value: object) -> bool:
    return callable(value) and hasattr(value, f"{hookspecs.PROJECT_NAME}_spec")


def _truthy(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]
