"""The baseline policies behave as the systems they stand for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from session_builders import tool_session

import middleware
from middleware.policy.resources import data_dir

BASELINES = data_dir("policies") / "baselines"


def session(n: int, size: int) -> list[dict[str, Any]]:
    return tool_session(*[("bash", f"{i:04d}" + "x" * size) for i in range(n)])


def outputs(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


def run(name: str, messages: list[dict[str, Any]]) -> middleware.ProcessResult:
    with middleware.Pipeline.from_policy(BASELINES / f"{name}.yaml") as pipe:
        return pipe.process(messages)


@pytest.mark.parametrize("path", sorted(BASELINES.glob("*.yaml")), ids=lambda p: p.stem)
def test_baselines_load(path: Path) -> None:
    assert middleware.load_policy(path).name == path.stem


def test_none_changes_nothing_even_a_broken_history() -> None:
    broken = session(3, 30_000)[:-1]  # a call without its result, huge outputs
    result = run("none", broken)
    assert result.messages == broken
    assert not result.changed


def test_observation_masking_keeps_the_last_ten_outputs() -> None:
    kept = outputs(run("observation-masking", session(14, 500)).messages)
    assert all(o.startswith("[Old tool output omitted: 1 lines.") for o in kept[:4])
    assert kept[4:] == outputs(session(14, 500))[4:]


def test_anthropic_clear_tool_uses_waits_for_its_trigger_then_keeps_three() -> None:
    small = session(12, 1000)  # ~12,000 chars: far below 100,000 tokens
    assert not run("anthropic-clear-tool-uses", small).report.by_step("microcompact")
    # 25 results just under the budget's cap: ~475,000 chars sent, past 100,000 tokens.
    # (The trigger weighs the request as sent: 12 results of 40,000 chars the budget step
    # cuts to ~5 KB each are a 60 KB request, far below it.)
    assert not run("anthropic-clear-tool-uses", session(12, 40_000)).report.by_step("microcompact")
    kept = outputs(run("anthropic-clear-tool-uses", session(25, 19_000)).messages)
    assert all(o.startswith("[Tool result cleared.") for o in kept[:22])
    assert not any(o.startswith("[Tool result cleared.") for o in kept[22:])


def test_chatcli_compacts_on_every_turn() -> None:
    report = run("chatcli", session(6, 5000)).report
    kinds = [a.kind for a in report.by_step("microcompact")]
    assert kinds == ["summarized", "summarized", "truncated", "truncated"]
