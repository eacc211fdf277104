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
from typing import Any, TypeVar

from middleware.errors import PluginError
from middleware.plugin.capabilities import SpillStore
from middleware.report import ProblemReport
from middleware.spill import SpillError

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Runs one call of the store's code; the plugin host's runner applies its time limit.
Runner = Callable[[Callable[[], T]], T]

#: The hook a problem of the store is reported under.
HOOK = "spill_store"


def _direct(call: Callable[[], T]) -> T:
    return call()


class GuardedSpillStore:
    """The store ``plugin`` returned from ``spill_store``, with its failures contained.

    ``save`` returns a non-empty string location or raises :class:`SpillError` (whatever
    the store raised or returned instead); ``load`` returns a string or ``None``; ``close``
    never raises. Each failure is logged as a :class:`PluginError` naming the plugin and
    the hook, and added to ``problems`` (the report of the call being processed, through
    :meth:`reporting_to`) once per message.
    """

    def __init__(
        self,
        store: SpillStore,
        plugin: str,
        *,
        problems: list[ProblemReport] | None = None,
        runner: Runner[Any] = _direct,
    ) -> None:
        self.store = store
        self.plugin = plugin
        self._problems = problems
        self._runner = runner

    def reporting_to(
        self, problems: list[ProblemReport], runner: Runner[Any] | None = None
    ) -> GuardedSpillStore:
        """The same store, reporting its failures into ``problems`` (one ``process()``
        call's report) and run through ``runner`` (that call's time limit)."""
        return GuardedSpillStore(
            self.store, self.plugin, problems=problems, runner=runner or self._runner
        )

    def save(self, key: str, content: str, *, suffix: str = ".txt") -> str:
        try:
            location = self._runner(lambda: self.store.save(key, content, suffix=suffix))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            raise self._spill_error(f"save() raised {_describe(exc)}") from exc
        if not isinstance(location, str) or not location:
            raise self._spill_error(
                f"save() returned {location!r}, expected a non-empty string location "
                "(the path or URL the preview names)"
            )
        return location

    def load(self, location: str) -> str | None:
        try:
            content = self._runner(lambda: self.store.load(location))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            self._failed(f"load() raised {_describe(exc)}; read as nothing saved there")
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
            self._runner(self.store.close)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            self._failed(f"close() raised {_describe(exc)}")

    def _spill_error(self, detail: str) -> SpillError:
        error = self._failed(f"{detail}; the result is handled as spill.on_error says")
        return SpillError(str(error))

    def _failed(self, detail: str) -> PluginError:
        error = PluginError(self.plugin, HOOK, f"the store it provided: {detail}")
        logger.error("%s", error)
        problem = ProblemReport(self.plugin, HOOK, error.detail)
        if self._problems is not None and problem not in self._problems:
            self._problems.append(problem)
        return error


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
