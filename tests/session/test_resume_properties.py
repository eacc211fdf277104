"""Any sequence of requests comes out of a pipeline that continues them as it comes out of
one that processes every request in full (no cache: it never continues): growing
histories, retries, cache markers that move, old messages edited, turns dropped, requests
of another conversation in between, and a policy that makes the boundary move often."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from session_builders import with_cache_marker

import middleware
from middleware.cache import DerivedCache

POLICY = {
    "budget": {"max_result_chars": 3_000},
    "microcompact": {
        "truncate_turns": 1,
        "summarize_turns": 3,
        "min_content": 500,
        "schedule": {
            "trigger_tokens": 500,
            "step_turns": 1,
            "min_reclaim_tokens": 100,
            "min_reclaim_ratio": 0,
            "rewrite_cost": 0.5,
        },
        "inputs": {"tools": ["Edit"], "min_chars": 200, "clear_turns": 1},
    },
}


@st.composite
def turns(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    """Per turn: the tool, its input text and its output."""
    out = []
    for i in range(draw(st.integers(1, 20))):
        tool = draw(st.sampled_from(["Bash", "Read", "Edit"]))
        lines = draw(st.sampled_from([0, 3, 40, 150, 400]))
        output = "\n".join(f"{tool} line {n} of step {i}: fine" for n in range(lines))
        argument = "x" * draw(st.sampled_from([10, 600]))
        out.append((tool, argument, output))
    return out


def history(task: str, steps: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for i, (tool, argument, output) in enumerate(steps):
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Step {i}."},
            {"type": "tool_use", "id": f"toolu_{i:03}", "name": tool,
             "input": {"command": argument} if tool != "Edit" else
                      {"file_path": "a.py", "old_string": argument, "new_string": argument}},
        ]})  # fmt: skip
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i:03}", "content": output},
        ]})  # fmt: skip
    return messages


@st.composite
def requests(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """A session's requests: mostly one more turn each, sometimes a retry, a moved cache
    marker, an old result edited, turns dropped, or another conversation's request."""
    steps = draw(turns())
    other = history("Another task.", draw(turns()))
    out: list[list[dict[str, Any]]] = []
    shown = 1
    for _ in range(draw(st.integers(2, 12))):
        what = draw(
            st.sampled_from(["grow", "grow", "grow", "retry", "marker", "edit", "drop", "other"])
        )
        if what == "grow":
            shown = min(shown + 1, len(steps))
        elif what == "drop":
            shown = max(shown - draw(st.integers(1, 3)), 1)
        messages = history("Fix the bug.", steps[:shown])
        if what == "marker":
            messages = with_cache_marker(messages)
        elif what == "edit" and len(messages) > 2:
            at = draw(st.integers(1, (len(messages) - 1) // 2)) * 2  # a result message
            messages = copy.deepcopy(messages)
            messages[at]["content"][0]["content"] += "\nedited"
        elif what == "other":
            messages = other
        out.append(messages)
    return out


def replay(root: Path, sequence: list[list[dict[str, Any]]], cache: bool) -> list[str]:
    overrides = {**POLICY, "spill": {"root": str(root), "keep": True}}
    policy = middleware.load_policy(None, env={}, dotenv_path=False, overrides=overrides)
    kwargs = {} if cache else {"cache": DerivedCache(0)}
    with middleware.Pipeline(policy, session_id="p", **kwargs) as pipe:
        return [
            json.dumps(result.output) + result.report.to_json()
            for result in (pipe.process(m, format="anthropic") for m in sequence)
        ]


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(requests())
def test_any_sequence_of_requests_comes_out_as_processed_in_full(
    tmp_path: Path, sequence: list[list[dict[str, Any]]]
) -> None:
    assert replay(tmp_path, sequence, cache=True) == replay(tmp_path, sequence, cache=False)
