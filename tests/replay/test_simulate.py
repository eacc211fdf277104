"""The replay's summary figures mean what they say (issue 13, item 20: "spilled chars" went
negative, because it counted the text added for empty results)."""

from __future__ import annotations

from typing import Any

from middleware.replay.costs import PRICING
from middleware.replay.simulate import PolicySpec, simulate
from middleware.replay.transcripts import Transcript


def session(outputs: list[str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i, output in enumerate(outputs):
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function",
                 "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": output},
        ]  # fmt: skip
    return [*messages, {"role": "assistant", "content": "done"}]


def test_text_added_for_empty_results_is_counted_apart_from_text_spilled() -> None:
    transcript = Transcript("t", "json", "openai", session(["", "", "x" * 50_000, ""]))
    _, default = simulate([transcript], [PolicySpec("default", None)], PRICING["anthropic-5m"])
    assert default.chars_spilled > 40_000
    assert default.chars_added == 3 * len("(bash completed with no output)")
    assert default.to_dict()["chars_added"] == default.chars_added
