"""The capabilities called for a first answer are one table-driven call (issue 47, item 5):
every ``firstresult`` hook specification has a row of ``FIRST_RESULTS``, and the host asks
each row the same way (a failure or a wrong answer is reported and counts as none, the
next implementation is asked, the first right answer wins)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from middleware import hookimpl
from middleware.cache.lru import DerivedCache
from middleware.formats import get_codec
from middleware.plugin import hookspecs
from middleware.plugin.context import Internal, StepContext
from middleware.plugin.first_results import FIRST_RESULTS, FirstResult
from middleware.plugin.host import PluginHost
from middleware.policy import load_policy
from middleware.report import ProblemReport
from middleware.spill import SpillWorkspace


def first_result_specs() -> set[str]:
    """The hooks ``hookspecs`` declares with ``firstresult=True``."""
    marker = f"{hookspecs.PROJECT_NAME}_spec"
    return {
        name
        for name, value in vars(hookspecs).items()
        if getattr(value, marker, {}).get("firstresult")
    }


def test_every_first_result_hook_is_a_row_and_every_row_such_a_hook() -> None:
    hooks = [row.hook for row in FIRST_RESULTS]
    assert len(hooks) == len(set(hooks))
    assert set(hooks) == first_result_specs()


class Answers:
    """A plugin answering every hook it is registered for with ``value`` (or raising it)."""

    def __init__(self, hook: str, value: object) -> None:
        def answer() -> object:
            if isinstance(value, BaseException):
                raise value
            return value

        setattr(self, hook, hookimpl(answer))


def arguments_of(row: FirstResult[Any], tmp: Path) -> dict[str, Any]:
    """What the host passes a row's hook; a row that forks its ``context`` needs one."""
    if not row.forks_context:
        return {}
    policy = load_policy(env={}, dotenv_path=False)
    host = PluginHost.create(load_entrypoints=False, builtins=())
    internal = Internal("budget", host, cache=DerivedCache(0))
    store = SpillWorkspace("s", tmp)
    return {"context": StepContext(policy, get_codec("anthropic"), "s", store, internal=internal)}


@pytest.mark.parametrize("row", FIRST_RESULTS, ids=lambda row: row.hook)
@pytest.mark.parametrize("builtin", [False, True], ids=["third-party", "built-in"])
def test_a_wrong_answer_or_a_failure_is_reported_and_the_next_answer_wins(
    row: FirstResult[Any], builtin: bool, tmp_path: Path
) -> None:
    host = PluginHost.create(load_entrypoints=False, builtins=())
    # pluggy asks the plugin registered last first.
    host.register(Answers(row.hook, None), name="silent", builtin=builtin)
    host.register(Answers(row.hook, object()), name="wrong", builtin=builtin)
    host.register(Answers(row.hook, RuntimeError("down")), name="broken", builtin=builtin)
    problems: list[ProblemReport] = []
    arguments = arguments_of(row, tmp_path)

    assert host.first_answer(row, arguments, problems, limit=None) is None
    assert problems == [
        ProblemReport("broken", row.hook, "RuntimeError: down"),
        ProblemReport("wrong", row.hook, f"returned object, expected {row.expected}"),
    ]
