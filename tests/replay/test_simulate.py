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


def anthropic_session(outputs: list[str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i, output in enumerate(outputs):
        messages += [
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": output}]},
        ]  # fmt: skip
    return [*messages, {"role": "assistant", "content": "done"}]


def test_text_added_for_empty_results_is_counted_apart_from_text_spilled() -> None:
    """Anthropic's empty results get text (its models read a bare one as the turn's end);
    an OpenAI one is an ordinary answer, sent as it is, and costs nothing."""
    outputs = ["", "", "x" * 50_000, ""]
    for fmt, messages, added in (
        ("anthropic", anthropic_session(outputs), 3 * len("(bash completed with no output)")),
        ("openai", session(outputs), 0),
    ):
        transcript = Transcript("t", "json", fmt, messages)
        _, default = simulate([transcript], [PolicySpec("default", None)], PRICING["anthropic-5m"])
        assert default.chars_spilled > 40_000
        assert default.chars_added == added
        assert default.to_dict()["chars_added"] == default.chars_added


def test_the_recorded_clock_prices_the_cache_expiring() -> None:
    messages = session(["line of output\n" * 300] * 5)
    # One message time per message; the requests are answered at the assistant messages.
    times: list[float | None] = [0.0]
    for turn in range(6):
        times += [10.0 + turn * 60 + (900 if turn >= 3 else 0)] * (2 if turn < 5 else 1)
    timed = Transcript("t", "json", "openai", messages, message_times=tuple(times))
    untimed = Transcript("u", "json", "openai", messages)
    spec = [PolicySpec("default", None)]
    raw, _ = simulate([timed], spec, PRICING["anthropic-5m"])
    assert raw.expired == 1 and raw.to_dict()["requests_after_expiry"] == 1
    without_clock, _ = simulate([timed], spec, PRICING["anthropic-5m"], clock=False)
    never, _ = simulate([untimed], spec, PRICING["anthropic-5m"])
    assert without_clock.expired == never.expired == 0
    assert raw.cost > without_clock.cost == never.cost
    hour, _ = simulate([timed], spec, PRICING["anthropic-1h"])
    assert hour.expired == 0
