"""The plugin host: a typed facade over pluggy that runs every hook implementation isolated.

pluggy calls implementations last-registered-first and stops a hook call at the first
exception; both would let a third-party plugin reorder or kill the pipeline. The host
therefore calls the three step hooks itself, in a fixed order, and calls each
implementation on its own, so a failing plugin is reported and skipped, never fatal.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

import pluggy

from middleware.errors import PluginError
from middleware.plugin import hookspecs
from middleware.plugin.capabilities import DeclaredCap, SpillStore, ToolCap
from middleware.report import ProblemReport

if TYPE_CHECKING:
    from middleware.plugin.context import StepContext
    from middleware.policy import Policy
    from middleware.view import Conversation

logger = logging.getLogger(__name__)

#: Entry-point group third-party plugins register under (PyPA: ``^\w+(\.\w+)*$``).
ENTRY_POINT_GROUP = "chatcli_middleware"

#: Built-in plugins, registered after entry points and marked to run first in each step.
DEFAULT_PLUGINS: tuple[str, ...] = (
    "middleware.steps.pairing",
    "middleware.steps.budget",
    "middleware.steps.microcompact",
    "middleware.default_plugins.chatcli_tools",
)

#: The step hooks, in the order the host calls them, with the report's name for each.
STEP_HOOKS: tuple[tuple[str, str], ...] = (
    ("pairing", "repair_pairing"),
    ("budget", "enforce_budget"),
    ("microcompact", "microcompact"),
)

#: ``CHATCLI_LOAD_PLUGINS``: comma-separated entry-point names to load (empty: none).
LOAD_PLUGINS_ENV = "CHATCLI_LOAD_PLUGINS"
#: ``CHATCLI_BLOCK_PLUGINS``: comma-separated plugin names never to register.
BLOCK_PLUGINS_ENV = "CHATCLI_BLOCK_PLUGINS"


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

    def __init__(self) -> None:
        self._pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        self._builtin: set[str] = set()
        #: plugin name -> (distribution name, version), for entry-point plugins.
        self._distributions: dict[str, tuple[str, str]] = {}
        self.load_problems: list[ProblemReport] = []

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
        host = cls()
        environ = os.environ if env is None else env
        for name in _split(environ.get(BLOCK_PLUGINS_ENV, "")):
            host._pm.set_blocked(name)
        if load_entrypoints:
            host._load_entrypoints(environ.get(LOAD_PLUGINS_ENV))
        for module_name in builtins:
            host.register(importlib.import_module(module_name), name=module_name, builtin=True)
        host._pm.check_pending()
        return host

    def register(self, plugin: object, name: str | None = None, *, builtin: bool = False) -> str:
        """Register a plugin object (module, class or instance) and return its name."""
        try:
            registered = self._pm.register(plugin, name=name)
        except (pluggy.PluginValidationError, ValueError) as exc:
            raise PluginError(name or repr(plugin), "register", str(exc)) from exc
        if registered is None:  # blocked
            return name or self._pm.get_name(plugin) or repr(plugin)
        if builtin:
            self._builtin.add(registered)
        return registered

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
                self._pm.register(plugin, name=ep.name)
            except Exception as exc:  # a broken plugin must not take the host down
                problem = ProblemReport(ep.name, "load", f"{type(exc).__name__}: {exc}")
                self.load_problems.append(problem)
                logger.error("could not load plugin %r: %s", ep.name, problem.message)
                continue
            if ep.dist is not None:
                self._distributions[ep.name] = (ep.dist.name, ep.dist.version)

    # -- steps ---------------------------------------------------------------------------

    def run_step(self, hook_name: str, conversation: Conversation, context: StepContext) -> None:
        """Run every implementation of one step hook, isolated: one that raises is rolled
        back (the conversation is restored to what it was before it ran) and reported."""
        for impl in self._ordered_impls(hook_name):
            snapshot = conversation.checkpoint()
            recorded = len(context.actions)
            kwargs = {"conversation": conversation, "context": context}
            try:
                impl.function(**{arg: kwargs[arg] for arg in impl.argnames})
                conversation.check()
            except Exception as exc:
                conversation.restore(snapshot)
                del context.actions[recorded:]
                self._report(context.problems, impl.plugin_name, hook_name, exc)

    # -- capabilities --------------------------------------------------------------------

    def tool_result_cap(self, tool_name: str, problems: list[ProblemReport]) -> DeclaredCap | None:
        for plugin_name, value in self._first_results(
            "tool_result_cap", {"tool_name": tool_name}, problems
        ):
            if isinstance(value, ToolCap):
                return DeclaredCap(value, plugin_name)
            self._wrong_type(problems, plugin_name, "tool_result_cap", "a ToolCap", value)
        return None

    def detect_content_type(
        self, text: str, tool_name: str | None, problems: list[ProblemReport]
    ) -> str | None:
        for plugin_name, value in self._first_results(
            "detect_content_type", {"text": text, "tool_name": tool_name}, problems
        ):
            if isinstance(value, str) and value:
                return value
            self._wrong_type(problems, plugin_name, "detect_content_type", "a string", value)
        return None

    def summarize_result(
        self, text: str, tool_name: str | None, content_type: str, path: str,
        problems: list[ProblemReport],
    ) -> str | None:  # fmt: skip
        kwargs = {"text": text, "tool_name": tool_name, "content_type": content_type, "path": path}
        for plugin_name, value in self._first_results("summarize_result", kwargs, problems):
            if isinstance(value, str) and value:
                return value if path in value else f"{value}\nFull output: {path}"
            self._wrong_type(problems, plugin_name, "summarize_result", "a string", value)
        return None

    def spill_store(
        self, policy: Policy, session_id: str, problems: list[ProblemReport]
    ) -> SpillStore | None:
        for plugin_name, value in self._first_results(
            "spill_store", {"policy": policy, "session_id": session_id}, problems
        ):
            if isinstance(value, SpillStore):
                return value
            self._wrong_type(problems, plugin_name, "spill_store", "a SpillStore", value)
        return None

    def token_counter(self, fallback: Callable[[str], int]) -> Callable[[str], int]:
        """A token counter from the first plugin implementing ``count_tokens``, or
        ``fallback`` itself when none does. A plugin that fails or answers a wrong type is
        reported once and ``fallback`` counts instead."""
        if not self._ordered_impls("count_tokens"):
            return fallback
        problems: list[ProblemReport] = []

        def count(text: str) -> int:
            for plugin_name, value in self._first_results("count_tokens", {"text": text}, problems):
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    return value
                self._wrong_type(problems, plugin_name, "count_tokens", "an int >= 0", value)
            return fallback(text)

        return count

    def policy_reloaded(self, old: Policy, new: Policy, problems: list[ProblemReport]) -> None:
        for impl in self._ordered_impls("policy_reloaded"):
            try:
                impl.function(old=old, new=new)
            except Exception as exc:
                self._report(problems, impl.plugin_name, "policy_reloaded", exc)

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

    def _first_results(
        self, hook_name: str, kwargs: dict[str, Any], problems: list[ProblemReport]
    ) -> Iterable[tuple[str, Any]]:
        for impl in self._ordered_impls(hook_name):
            call: Callable[..., Any] = impl.function
            try:
                value = call(**{arg: kwargs[arg] for arg in impl.argnames})
            except Exception as exc:
                self._report(problems, impl.plugin_name, hook_name, exc)
                continue
            if value is not None:
                yield impl.plugin_name, value

    @staticmethod
    def _report(problems: list[ProblemReport], plugin: str, hook: str, exc: BaseException) -> None:
        error = PluginError(plugin, hook, f"{type(exc).__name__}: {exc}")
        logger.error("%s (default behaviour used)", error, exc_info=exc)
        problems.append(ProblemReport(plugin, hook, error.detail))

    @staticmethod
    def _wrong_type(
        problems: list[ProblemReport], plugin: str, hook: str, expected: str, value: object
    ) -> None:
        error = PluginError(plugin, hook, f"returned {type(value).__name__}, expected {expected}")
        logger.error("%s (default behaviour used)", error)
        problems.append(ProblemReport(plugin, hook, error.detail))


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]
