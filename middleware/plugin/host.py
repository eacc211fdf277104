"""The plugin host: which plugins there are, and the typed calls of their hooks.

:class:`PluginHost` registers plugins (third-party entry points under the operator's allow
and block lists, then the built-in plugins, :data:`DEFAULT_PLUGINS`) and refuses a bad one
at registration, with the plugin and hook named: a hook that does not exist, a signature
that does not match, or a hook wrapper (``wrapper=True``, ``hookwrapper=True``), which
needs pluggy's own call loop and would give the isolation of each implementation up. An
entry point that fails to load is kept in :attr:`PluginHost.load_problems`, never fatal.

The calls themselves, each implementation isolated, are inherited: the capabilities from
:class:`~middleware.plugin.calls.HookCalls` (the first-answer ones one call over the
table of :mod:`.first_results`), the steps from :class:`~middleware.plugin.step_calls.StepCalls`.
"""

from __future__ import annotations

import difflib
import importlib
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points

import pluggy

from middleware.errors import PluginError
from middleware.plugin import hookspecs
from middleware.plugin.calls import trace_logger
from middleware.plugin.first_results import FULL_OUTPUT
from middleware.plugin.places import deciding_hooks
from middleware.plugin.step_calls import ADMISSION, STEPS, StepCalls
from middleware.report import ProblemReport

#: What other modules import from here (the step hooks and the summary line included).
__all__ = [
    "ADMISSION",
    "BLOCK_PLUGINS_ENV",
    "DECIDING_HOOKS",
    "DEFAULT_PLUGINS",
    "ENTRY_POINT_GROUP",
    "FULL_OUTPUT",
    "LOAD_PLUGINS_ENV",
    "STEPS",
    "TRACE_HOOKS_ENV",
    "PluginHost",
    "PluginInfo",
]

logger = logging.getLogger(__name__)

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

#: Hooks whose third-party implementations decide what old turns become.
DECIDING_HOOKS: tuple[str, ...] = deciding_hooks(hookspecs)

#: ``CHATCLI_LOAD_PLUGINS``: comma-separated entry-point names to load (empty: none).
LOAD_PLUGINS_ENV = "CHATCLI_LOAD_PLUGINS"
#: ``CHATCLI_BLOCK_PLUGINS``: comma-separated plugin names never to register.
BLOCK_PLUGINS_ENV = "CHATCLI_BLOCK_PLUGINS"
#: ``CHATCLI_TRACE_HOOKS``: ``1``/``true`` logs every hook implementation call.
TRACE_HOOKS_ENV = "CHATCLI_TRACE_HOOKS"


@dataclass(frozen=True)
class PluginInfo:
    """A registered plugin, for ``chatcli-mw plugins``."""

    name: str
    hooks: tuple[str, ...]
    builtin: bool
    distribution: str | None
    version: str | None


class PluginHost(StepCalls):
    """Owns a :class:`pluggy.PluginManager` and registers plugins into it; every hook call
    goes through a typed method (inherited: :class:`StepCalls`)."""

    def __init__(self, *, trace: bool = False) -> None:
        pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        pm.add_hookspecs(hookspecs)
        super().__init__(pm, set(), trace=trace)
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


def _is_spec(value: object) -> bool:
    return callable(value) and hasattr(value, f"{hookspecs.PROJECT_NAME}_spec")


def _truthy(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]
