"""The schedule weighs a summary by the size it will really have (issue 17): summaries
that may keep every mention still get written when they pay (an estimate of 20 characters
per allowed mention switched compaction off for large counts)."""

from __future__ import annotations

from typing import Any

import middleware

EVERY_TURN = {
    "budget": {"enabled": False},
    "microcompact": {
        "mentions": 1_000,
        "schedule": {"rewrite_cost": 0, "expected_turns_min": 0},
    },
}


def session(turns: int, output: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(turns):
        call = {"type": "tool_use", "id": f"c{i}", "name": "Bash", "input": {"n": i}}
        result = {"type": "tool_result", "tool_use_id": f"c{i}", "content": output}
        messages += [
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ]
    return messages


def summarized(policy: middleware.Policy, messages: list[dict[str, Any]]) -> list[str]:
    with middleware.Pipeline(policy) as pipe:
        report = pipe.process(messages).report
    return [a.tool_call_id or "" for a in report.actions if a.kind == "summarized"]


def test_a_large_mention_count_does_not_switch_compaction_off() -> None:
    """A 10,000-character log with few names: its summary is small whatever the count."""
    policy = middleware.load_policy(env={}, dotenv_path=False, overrides=EVERY_TURN)
    log = "step done ok\n" * 800 + "see build/out.log\n"
    assert summarized(policy, session(8, log))


def test_a_spilled_result_is_weighed_by_the_summary_of_its_full_text(
    summaries_read: list[str],
) -> None:
    """The summary is made from the full text, not from the budget step's preview: the
    schedule weighs that same summary, and reads each text once."""
    overrides = {
        "budget": {"max_result_chars": 6_000},
        "microcompact": {
            "mentions": 20,
            "schedule": {"rewrite_cost": 0, "expected_turns_min": 0, "trigger_tokens": 0},
        },
    }
    policy = middleware.load_policy(env={}, dotenv_path=False, overrides=overrides)
    log = "".join(f"src/pkg/module_{n}.py:{n}: value\n" for n in range(400))
    messages = session(8, log)
    assert summarized(policy, messages)
    assert summaries_read and all(text == log for text in summaries_read)
