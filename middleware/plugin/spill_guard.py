"""A spill store a plugin provides, guarded so that its failures are its own.

The steps call ``save`` expecting a location or an ``OSError`` (which the budget step's
``spill.on_error`` policy handles for that one result). A third-party store may raise
anything or answer anything; unguarded, one ``RuntimeError`` would roll the whole budget
step back (every result unenforced) and blame the built-in step, and a ``None`` would end
up in previews as "saved to None". The guard turns every failure of the store into a
:class:`~middleware.spill.SpillError` naming the plugin, reports it as that plugin's
problem, and never lets ``load`` or ``close`` fail.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from middleware.errors import PluginError
from middleware.plugin.capabilities import SpillStore
from middleware.plugin.runner import TimeLimits
from middleware.plugin.settings import TIME_LIMIT_KEY
from middleware.report import ProblemReport
from middleware.spill import SpillError

logger = logging.getLogger(__name__)

#: The hook a problem of the store is reported under.
HOOK = "spill_store"


class GuardedSpillStore:
    """The store ``plugin`` returned from ``spill_store``, with its failures contained.

    ``save`` returns a non-empty string location or raises :class:`SpillError` (whatever
    the store raised or returned instead, or no answer within the time limit); ``load``
    returns a string or ``None``; ``close`` never raises. Each failure is logged as a
    :class:`PluginError` naming the plugin and the hook, and added to ``problems`` (the
    report of the call being processed, through :meth:`reporting_to`) once per message.
    With ``limits``, every call of the store runs on a worker thread under ``time_limit``
    seconds, as a third-party hook implementation does.
    """

    def __init__(
        self,
        store: SpillStore,
        plugin: str,
        *,
        problems: list[ProblemReport] | None = None,
        limits: TimeLimits | None = None,
        time_limit: float | None = None,
    ) -> None:
        self.store = store
        self.plugin = plugin
        self._problems = problems
        self._limits = limits
        self._time_limit = time_limit

    #: A plugin's store remembers nothing in the shared cache (its contents may change
    #: behind it), keeps no record or readings of the session, and holds nothing.
    token: None = None
    local: None = None

    @property
    def provided(self) -> SpillStore:
        """The store as the plugin returned it."""
        return self.store

    def sync(self) -> None:
        """Nothing to sync: the plugin's store saves as it sees fit."""

    def hold(self, seconds: float) -> None:
        """Nothing to hold: a plugin's store keeps its own."""

    def reporting_to(
        self, problems: list[ProblemReport], time_limit: float | None
    ) -> GuardedSpillStore:
        """The same store, reporting its failures into ``problems`` (one ``process()``
        call's report) under ``time_limit`` (that call's policy)."""
        return GuardedSpillStore(
            self.store, self.plugin, problems=problems, limits=self._limits, time_limit=time_limit
        )

    def save(self, key: str, content: str, *, suffix: str = ".txt") -> str:
        try:
            location = self._run("save", partial(self.store.save, key, content, suffix=suffix))
        except _StoreFailed as failed:
            raise self._spill_error(f"save() {failed}") from failed.__cause__
        if not isinstance(location, str) or not location:
            raise self._spill_error(
                f"save() returned {location!r}, expected a non-empty string location "
                "(the path or URL the preview names)"
            )
        return location

    def load(self, location: str) -> str | None:
        try:
            content = self._run("load", partial(self.store.load, location))
        except _StoreFailed as failed:
            self._failed(f"load() {failed}; read as nothing saved there")
            return None
        if content is not None and not isinstance(content, str):
            self._failed(
                f"load() returned {type(content).__name__}, expected a string or None; "
                "read as nothing saved there"
            )
            return None
        return content

    def close(self) -> None:
        try:
            self._run("close", self.store.close)
        except _StoreFailed as failed:
            self._failed(f"close() {failed}")

    def _run(self, method: str, call: Callable[[], Any]) -> Any:
        """``call()``'s value, or :class:`_StoreFailed` saying why there is none."""
        if self._limits is None:  # inline: a KeyboardInterrupt may be a real Ctrl-C
            try:
                return call()
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                raise _StoreFailed(f"raised {_describe(exc)}") from exc
        outcome = self._limits.run((self.plugin, HOOK, method), call, self._time_limit)
        if outcome.skipped:
            raise _StoreFailed(
                "was skipped: an earlier call is still running past the time limit "
                f"({TIME_LIMIT_KEY})"
            )
        if not outcome.finished:
            seconds = "no limit" if self._time_limit is None else f"{self._time_limit:g} s"
            raise _StoreFailed(
                f"did not answer within the time limit of {seconds} ({TIME_LIMIT_KEY})"
            )
        if outcome.error is not None:  # on a worker thread: whatever it is, it is the store's
            raise _StoreFailed(f"raised {_describe(outcome.error)}") from outcome.error
        return outcome.value

    def _spill_error(self, detail: str) -> SpillError:
        error = self._failed(f"{detail}; the result is handled as spill.on_error says")
        return SpillError(str(error))

    def _failed(self, detail: str) -> PluginError:
        """Log and report one failure (once per report: a store that fails for every
        result of a request is one problem of it)."""
        error = PluginError(self.plugin, HOOK, f"the store it provided: {detail}")
        problem = ProblemReport(self.plugin, HOOK, error.detail)
        if self._problems is not None:
            if problem in self._problems:
                return error
            self._problems.append(problem)
        logger.error("%s", error)
        return error


class _StoreFailed(Exception):
    """Why the store gave no answer (its exception is the ``__cause__``)."""


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
