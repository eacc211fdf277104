"""How the host asks ``compact_before_spill``: pluggy's first-answer order, a third-party
answer isolated like any other (a failure, a wrong type or a late answer is reported and
promises nothing; only an answer in time has its shared state taken over)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware.plugin.host import PluginHost

MICROCOMPACT = "middleware.steps.microcompact"
HOOK = "compact_before_spill"


def history(*sizes: int) -> list[dict[str, Any]]:
    """One bash call per turn whose result has ``sizes[i]`` characters."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i, size in enumerate(sizes):
        messages += [
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{i}", "content": "x\n" * (size // 2)}]},
        ]  # fmt: skip
    return messages


#: Five results of 30,000 characters in a 32,768-token window: the last one is cut unless
#: a compaction promises room.
TIGHT = history(30_000, 30_000, 30_000, 30_000, 30_000)


def run(
    tmp_path: Path, *plugins: object, block: str = MICROCOMPACT, **overrides: Any
) -> middleware.ProcessResult:
    host = PluginHost.create(load_entrypoints=False, env={"CHATCLI_BLOCK_PLUGINS": block})
    for i, plugin in enumerate(plugins):
        host.register(plugin, name=f"plugin-{i}")
    policy = middleware.load_policy(
        "preset:hermes", env={}, dotenv_path=False,
        overrides={"spill.root": str(tmp_path), "budget.context_aware.window_tokens": 32_768,
                   **overrides},
    )  # fmt: skip
    with middleware.Pipeline(policy, host=host, session_id="promise") as pipe:
        return pipe.process(TIGHT)


class Answers:
    """A plugin that answers ``value`` (or raises it) and notes what it was asked."""

    def __init__(self, value: object) -> None:
        self.value = value
        self.asked: list[int] = []

    @middleware.hookimpl
    def compact_before_spill(self, before_turn: int) -> object:
        self.asked.append(before_turn)
        if isinstance(self.value, BaseException):
            raise self.value
        return self.value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (ValueError("no room"), "ValueError: no room"),
        ("lots", "returned str, expected an int >= 0"),
        (True, "returned bool, expected an int >= 0"),
        (-5, "returned int, expected an int >= 0"),
    ],
)
def test_a_failing_answer_is_reported_and_promises_nothing(
    tmp_path: Path, value: object, message: str
) -> None:
    plugin = Answers(value)
    result = run(tmp_path, plugin)
    assert plugin.asked == [2]  # the fifth turn (4) with its two turns protected
    (problem,) = result.report.problems
    assert (problem.plugin, problem.hook) == ("plugin-0", HOOK)
    assert message in problem.message
    alone = run(tmp_path)  # no plugin answers: the budget step counts the history as it is
    assert result.messages == alone.messages
    assert [a.kind for a in result.report.actions] == ["spilled"]


def test_the_built_in_answers_first_and_a_plugin_is_asked_when_it_promises_nothing(
    tmp_path: Path,
) -> None:
    plugin = Answers(None)
    loaded = run(tmp_path, plugin, block="")
    assert plugin.asked == []  # the built-in compaction promised: first answer wins
    assert [a.kind for a in loaded.report.actions] == ["summarized", "summarized"]
    small = Answers(None)
    # Results under microcompact.min_content: the built-in has nothing worth promising.
    run(tmp_path, small, block="", **{"microcompact.min_content": 100_000})
    assert small.asked == [2]


def test_a_late_answer_is_reported_and_its_shared_state_is_not_taken_over(
    tmp_path: Path,
) -> None:
    release = threading.Event()
    seen: list[bool] = []

    class Late:
        @middleware.hookimpl
        def compact_before_spill(self, context: Any) -> int:
            context.shared["late:promised"] = {(2, 0)}
            release.wait(5)
            return 60_000

        @middleware.hookimpl
        def microcompact(self, context: Any) -> None:
            seen.append("late:promised" in context.shared)

    try:
        result = run(tmp_path, Late(), **{"plugins.time_limit_seconds": 0.05})
    finally:
        release.set()
    (problem,) = result.report.problems
    assert problem.hook == HOOK
    assert "did not finish within the time limit" in problem.message
    assert "counted as no promise" in problem.message
    assert seen == [False]
    assert [a.kind for a in result.report.actions] == ["spilled"]


def test_an_answer_in_time_has_its_shared_state_taken_over(tmp_path: Path) -> None:
    seen: list[object] = []

    class Keeps:
        @middleware.hookimpl
        def compact_before_spill(self, context: Any) -> int:
            context.shared["keeps:promised"] = "first two"
            return 0  # promises nothing worth counting: the caps stay as they were

        @middleware.hookimpl
        def microcompact(self, context: Any) -> None:
            seen.append(context.shared.get("keeps:promised"))

    result = run(tmp_path, Keeps())
    assert seen == ["first two"]
    assert [a.kind for a in result.report.actions] == ["spilled"]
    assert not result.report.problems
