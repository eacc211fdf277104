"""How the host reports a plugin's failure: logged as a :class:`PluginError` naming the
plugin and the hook, and kept once in the ``problems`` of the call (the request's report)."""

from __future__ import annotations

import logging

from middleware.errors import PluginError
from middleware.plugin.settings import TIME_LIMIT_KEY
from middleware.report import ProblemReport

#: The host's logger, named as the operators' docs name it (docs/proxy.md), whichever of
#: the host's modules reports.
logger = logging.getLogger("middleware.plugin.host")


def report_late(
    problems: list[ProblemReport],
    plugin: str,
    hook: str,
    *,
    limit: float | None,
    skipped: bool,
    consequence: str,
    log: bool = True,
) -> None:
    """A third-party call that did not finish within ``limit`` (or was not made: an earlier
    one is still running late); ``consequence`` says what the host did instead."""
    if skipped:
        what = "skipped: an earlier call is still running past the time limit"
    else:
        what = f"did not finish within the time limit of {_seconds(limit)}"
    detail = (
        f"{what} ({TIME_LIMIT_KEY}); {consequence}. Make the implementation faster, or "
        "raise the limit"
    )
    report_problem(problems, plugin, hook, detail, log=log)


def report_error(
    problems: list[ProblemReport],
    plugin: str,
    hook: str,
    exc: BaseException,
    *,
    log: bool = True,
) -> None:
    """An implementation that raised ``exc``."""
    report_problem(problems, plugin, hook, f"{type(exc).__name__}: {exc}", exc, log=log)


def report_wrong_type(
    problems: list[ProblemReport],
    plugin: str,
    hook: str,
    expected: str,
    value: object,
    *,
    log: bool = True,
) -> None:
    """An implementation that answered ``value`` where ``expected`` was wanted."""
    detail = f"returned {type(value).__name__}, expected {expected}"
    report_problem(problems, plugin, hook, detail, log=log)


def report_problem(
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


def _seconds(limit: float | None) -> str:
    return "no limit" if limit is None else f"{limit:g} s"
