"""A subagent's report keeps at least ``budget.reports.min_chars`` (issue 17): the model
reads it whole and quotes it later, so spilling it at the generic cap made it read it back
(subagent.jsonl cost more than no middleware)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware.errors import PolicyError


def history(tool: str, chars: int) -> list[dict[str, Any]]:
    call = {"type": "tool_use", "id": "c1", "name": tool, "input": {"prompt": "look"}}
    report = "".join(f"Finding {n}: module_{n}.py needs a fix.\n" for n in range(chars // 40))
    result = {"type": "tool_result", "tool_use_id": "c1", "content": report[:chars]}
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
    ]


def spilled(tmp_path: Path, tool: str, chars: int, **overrides: Any) -> list[Any]:
    overrides = {"spill": {"root": str(tmp_path)}, "microcompact": {"enabled": False}, **overrides}
    policy = middleware.load_policy(None, env={}, dotenv_path=False, overrides=overrides)
    with middleware.Pipeline(policy) as pipe:
        report = pipe.process(history(tool, chars)).report
    return [a for a in report.actions if a.kind == "spilled"]


@pytest.mark.parametrize("tool", ["Task", "Agent", "delegate_task"])
def test_a_report_under_the_floor_is_kept_whole(tmp_path: Path, tool: str) -> None:
    assert spilled(tmp_path, tool, 9_000) == []
    # Any other tool's result of the same size is spilled at the 5,000 cap.
    (action,) = spilled(tmp_path, "Bash", 9_000)
    assert action.detail["cap"] == 5_000


def test_a_report_over_the_floor_is_spilled_at_the_floor(tmp_path: Path) -> None:
    (action,) = spilled(tmp_path, "Task", 30_000)
    assert action.detail["cap"] == 20_000
    assert action.detail["cap_source"] == "budget.reports.min_chars"


def test_a_tools_entry_wins_over_the_floor(tmp_path: Path) -> None:
    (action,) = spilled(tmp_path, "Task", 9_000, tools={"Task": {"max_chars": 3_000}})
    assert action.detail["cap"] == 3_000


def test_no_floor_caps_reports_like_any_result(tmp_path: Path) -> None:
    (action,) = spilled(tmp_path, "Task", 9_000, budget={"reports": {"min_chars": None}})
    assert action.detail["cap"] == 5_000


def test_report_tools_may_be_glob_patterns(tmp_path: Path) -> None:
    reports = {"reports": {"tools": ["*_agent"]}}
    assert spilled(tmp_path, "research_agent", 9_000, budget=reports) == []
    assert len(spilled(tmp_path, "Task", 9_000, budget=reports)) == 1


def test_a_floor_under_the_cap_changes_nothing(tmp_path: Path) -> None:
    policy = middleware.load_policy("preset:claude-code", env={}, dotenv_path=False)
    with middleware.Pipeline(policy) as pipe:
        assert pipe.result_cap("Task").max_chars == 50_000


def test_a_negative_floor_is_refused() -> None:
    with pytest.raises(PolicyError, match="min_chars"):
        middleware.load_policy(
            None, env={}, dotenv_path=False, overrides={"budget": {"reports": {"min_chars": -1}}}
        )
