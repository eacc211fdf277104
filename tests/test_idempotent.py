"""Processing the output again changes nothing, whatever the steps changed the first time
(issue 13, item 2: sizes of edited messages were measured from the original wire dicts)."""

from __future__ import annotations

from typing import Any

import pytest

import middleware

Outputs = list[tuple[str, str, bool]]


def history(fmt: str, outputs: Outputs) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i, (tool, output, error) in enumerate(outputs):
        if fmt == "openai":
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"c{i}", "type": "function",
                     "function": {"name": tool, "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": output},
            ]  # fmt: skip
        else:
            messages += [
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": f"c{i}", "name": tool, "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"c{i}", "content": output,
                     "is_error": error}]},
            ]  # fmt: skip
    return messages


def assert_idempotent(messages: list[dict[str, Any]], policy: str | None = None) -> None:
    with middleware.Pipeline.from_policy(policy) as pipe:
        first = pipe.process(messages)
        second = pipe.process(first.messages)
    assert second.messages == first.messages, [a.kind for a in second.report.actions]
    assert not second.report.actions


SHORT = [("ls", "a.py", False), ("ls", "b.py", False), ("ls", "c.py", False)]


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_a_result_the_budget_cut_is_measured_as_sent(fmt: str) -> None:
    outputs = [("read", "a" * 19_000, False), ("bash", "E" * 200_000, True), *SHORT]
    assert_idempotent(history(fmt, outputs))


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_a_dropped_duplicate_result_is_measured_as_sent(fmt: str) -> None:
    messages = history(fmt, [("read", "a" * 19_000, False), ("grep", "g" * 9_000, False), *SHORT])
    duplicate = messages[4]
    if fmt == "anthropic":
        messages[4] = {**duplicate, "content": [*duplicate["content"], {
            "type": "tool_result", "tool_use_id": "c1", "content": "d" * 30_000}]}  # fmt: skip
    else:
        messages.insert(5, {**duplicate, "content": "d" * 30_000})
    assert_idempotent(messages)


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
@pytest.mark.parametrize("policy", [None, "preset:hermes", "preset:claude-code", "preset:ethos"])
def test_huge_and_non_ascii_results(fmt: str, policy: str | None) -> None:
    outputs = [
        ("bash", "ligne é — ü\n" * 180_000, False),  # 2 MB, not ASCII
        ("read", "日本語のテキスト\n" * 3_000, False),
        ("grep", "x" * 25_000, False),
        *SHORT,
    ]
    assert_idempotent(history(fmt, outputs), policy)
