"""Loop guards: counted per user turn, reported, and the policy's optional action."""

from __future__ import annotations

import json
from typing import Any

import pytest

import middleware
from middleware import LoopGuardError


def openai_turn(calls: list[tuple[str, dict[str, Any]]], user: str = "Go.") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
    for i, (name, arguments) in enumerate(calls):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "same answer"})
    return messages


def pipe(**overrides: Any) -> middleware.Pipeline:
    policy = middleware.load_policy(env={}, dotenv_path=False, overrides=overrides)
    return middleware.Pipeline(policy)


def test_default_reports_a_call_repeated_with_the_same_arguments_without_changing_anything() -> (
    None
):
    messages = openai_turn([("fetch", {"url": "u"})] * 6)
    with pipe() as p:
        result = p.process(messages)
    (alert,) = result.report.loop_alerts
    assert (alert.kind, alert.tool_name, alert.count, alert.call_ids[0]) == (
        "repeated_call",
        "fetch",
        6,
        "c0",
    )
    assert result.messages == messages and not result.changed
    assert "loop guard: fetch called 6 times alike" in "\n".join(result.report.summary_lines())
    assert result.report.to_dict()["loop_alerts"][0]["kind"] == "repeated_call"


def test_different_arguments_are_different_calls_unless_identical_is_name() -> None:
    messages = openai_turn([("fetch", {"url": f"u{i}"}) for i in range(6)])
    with pipe() as p:
        assert p.process(messages).report.loop_alerts == []
    with pipe(**{"loop_guard.identical": "name"}) as p:
        assert len(p.process(messages).report.loop_alerts) == 1


def test_argument_order_does_not_make_calls_different() -> None:
    calls = [("fetch", {"a": 1, "b": 2}), ("fetch", {"b": 2, "a": 1})] * 3
    with pipe() as p:
        assert p.process(openai_turn(calls)).report.loop_alerts[0].count == 6


def test_raise_ends_the_turn_with_a_typed_error() -> None:
    overrides = {"loop_guard.action": "raise", "loop_guard.max_calls_per_turn": 3}
    with (
        pipe(**overrides) as p,
        pytest.raises(LoopGuardError, match="4 tool calls in this turn") as caught,
    ):
        p.process(openai_turn([("a", {}), ("b", {}), ("c", {}), ("d", {})]))
    assert caught.value.alerts[0].kind == "too_many_calls"


def test_annotate_appends_the_notice_once_to_the_latest_result() -> None:
    with pipe(**{"loop_guard.action": "annotate", "loop_guard.notice": "STOP: {reason}"}) as p:
        result = p.process(openai_turn([("fetch", {})] * 6))
        assert result.changed and result.report.loop_alerts[0].annotated
        assert result.messages[-1]["content"].endswith(
            "STOP: fetch called 6 times alike, over the limit of 5"
        )
        assert result.messages[:-1] == openai_turn([("fetch", {})] * 6)[:-1]
        again = p.process(result.messages)
        assert again.messages == result.messages and not again.changed


def test_disabled_guard_and_null_limits() -> None:
    messages = openai_turn([("fetch", {})] * 30)
    with pipe(**{"loop_guard.enabled": False}) as p:
        assert p.process(messages).report.loop_alerts == []
    with pipe(**{"loop_guard.max_identical_calls": None}) as p:
        assert p.process(messages).report.loop_alerts == []


def test_a_bad_notice_template_is_a_policy_error_naming_the_key() -> None:
    with pytest.raises(
        middleware.PolicyError, match=r"\$\.loop_guard\.notice: unknown field\(s\) \{why\}"
    ):
        middleware.load_policy(env={}, dotenv_path=False, overrides={"loop_guard.notice": "{why}"})
