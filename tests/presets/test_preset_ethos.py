"""Ethos' turn-wide tool result budget and loop guards through
``policies/presets/ethos.yaml``, one test per scenario of the seed document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from middleware import ToolCap, hookimpl
from tests.preset_builders import batch, outputs, preset, spilled_text


class EthosTools:
    """read_file, web_search and delegate_task declare maxResultChars; terminal does not."""

    @hookimpl
    def tool_result_cap(self, tool_name: str) -> ToolCap | None:
        caps = {"read_file": 20_000, "web_search": 30_000, "delegate_task": 20_000}
        return ToolCap(caps[tool_name]) if tool_name in caps else None


def text(n: int) -> str:
    return "".join(chr(ord("a") + i % 26) for i in range(n))


def test_a_single_call_gets_the_whole_80k(tmp_path: Path) -> None:
    with preset("ethos", tmp_path) as pipe:
        fits = text(79_000)
        assert outputs(pipe.process(batch(("terminal", fits))).messages) == [fits]
        (cut,) = outputs(pipe.process(batch(("terminal", text(100_000)))).messages)
        assert 79_000 < len(cut) <= 80_000


@pytest.mark.parametrize(
    ("calls", "share"), [(1, 80_000), (2, 40_000), (3, 26_666), (4, 20_000), (5, 16_000)]
)
def test_parallel_calls_split_the_budget_evenly(tmp_path: Path, calls: int, share: int) -> None:
    with preset("ethos", tmp_path, EthosTools()) as pipe:
        result = pipe.process(batch(*((f"terminal{i}", text(90_000)) for i in range(calls))))
        assert all(share - 200 < len(t) <= share for t in outputs(result.messages))
        assert pipe.result_budget("terminal", parallel_calls=calls) == share


def test_a_tools_lower_declared_cap_wins(tmp_path: Path) -> None:
    with preset("ethos", tmp_path, EthosTools()) as pipe:
        alone = outputs(pipe.process(batch(("read_file", text(50_000)))).messages)[0]
        assert len(alone) <= 20_000  # 20k even though the call has the whole 80k
        three = pipe.process(
            batch(
                ("read_file", text(50_000)),
                ("web_search", text(50_000)),
                ("terminal", text(50_000)),
            )
        )
        lengths = [len(t) for t in outputs(three.messages)]
        assert lengths[0] <= 20_000 < lengths[1] <= 26_666 and lengths[2] <= 26_666
        assert pipe.result_budget("read_file", parallel_calls=3) == 20_000
        assert pipe.result_budget("web_search", parallel_calls=3) == 26_666


def test_the_marker_gives_the_original_length_and_the_head_is_a_plain_slice(
    tmp_path: Path,
) -> None:
    with preset("ethos", tmp_path) as pipe:
        output = text(45_231)
        result = pipe.process(batch(("a", output), ("b", "small"), ("c", "small")))
        cut = outputs(result.messages)[0]
        head, marker, pointer = cut.rsplit("\n", 2)
        assert marker == "[truncated — 45231 chars total]"
        assert output.startswith(head) and len(cut) <= 26_666
        assert pointer.startswith("[Full output: ") and spilled_text(pointer) == output


def test_the_budget_is_per_batch_not_per_turn(tmp_path: Path) -> None:
    with preset("ethos", tmp_path) as pipe:
        first = batch(*((f"t{i}", text(60_000)) for i in range(3)))
        first.append({"role": "assistant", "content": [{"type": "text", "text": "more"}]})
        history = batch(("x", text(60_000)), ("y", text(60_000)), before=first)
        result = pipe.process(history)
        iteration_1 = [b["content"] for b in result.messages[2]["content"]]
        iteration_2 = outputs(result.messages)
        assert all(len(t) <= 26_666 for t in iteration_1)
        assert all(26_666 < len(t) <= 40_000 for t in iteration_2)
        assert sum(map(len, iteration_1 + iteration_2)) > 80_000


def test_a_tool_that_trims_to_its_budget_is_left_alone(tmp_path: Path) -> None:
    with preset("ethos", tmp_path, EthosTools()) as pipe:
        budget = pipe.result_budget("terminal", parallel_calls=4)
        assert budget == 20_000
        trimmed = "\n".join(text(99) for _ in range(150))[:budget]  # cut at its own boundary
        admitted = pipe.admit("terminal", "call-1", trimmed, parallel_calls=4)
        assert admitted.text == trimmed and not admitted.changed
        ignored = pipe.admit("terminal", "call-2", text(30_000), parallel_calls=4)
        assert ignored.text.endswith("]") and "[truncated — 30000 chars total]" in ignored.text


def loop(calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """One user turn in which the model calls the tools one after the other."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the speech aloud."}]
    for i, (tool, arguments) in enumerate(calls):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"c{i}", "name": tool, "input": arguments}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"c{i}", "content": "ok"}],
            }
        )
    return messages


def test_the_21st_call_of_a_turn_trips_max_tool_calls_per_turn(tmp_path: Path) -> None:
    with preset("ethos", tmp_path) as pipe:
        twenty = loop([(f"read_{i % 5}", {"file": f"f{i}"}) for i in range(20)])
        assert pipe.process(twenty).report.loop_alerts == []
        result = pipe.process(loop([(f"read_{i % 5}", {"file": f"f{i}"}) for i in range(21)]))
        (alert,) = result.report.loop_alerts
        assert (alert.kind, alert.count, alert.limit) == ("too_many_calls", 21, 20)
        assert "over the limit of 20" in result.messages[-1]["content"][0]["content"]


def test_the_same_tool_more_than_five_times_trips_max_identical_tool_calls(
    tmp_path: Path,
) -> None:
    with preset("ethos", tmp_path) as pipe:
        assert (
            pipe.process(
                loop([("tts", {"text": f"part {i}"}) for i in range(5)])
            ).report.loop_alerts
            == []
        )
        result = pipe.process(loop([("tts", {"text": f"part {i}"}) for i in range(6)]))
        (alert,) = result.report.loop_alerts
        assert (alert.kind, alert.tool_name, alert.count, alert.limit) == (
            "repeated_call",
            "tts",
            6,
            5,
        )
        last = result.messages[-1]["content"][0]["content"]
        assert last.startswith("ok\n\n[Loop guard: tts called 6 times alike")
        again = pipe.process(result.messages)  # the notice is written once
        assert again.messages[-1]["content"][0]["content"] == last


def test_a_new_user_message_starts_a_new_count(tmp_path: Path) -> None:
    with preset("ethos", tmp_path) as pipe:
        history = loop([("tts", {}) for _ in range(6)])
        history.append({"role": "assistant", "content": [{"type": "text", "text": "done"}]})
        history.extend(loop([("tts", {})])[0:3])
        assert pipe.process(history).report.loop_alerts == []


def test_a_small_window_model_lowers_the_budget_with_one_setting(tmp_path: Path) -> None:
    # "Drop to 6-10k or your prompt does not fit": AgentLoopConfig.options.resultBudgetChars.
    with preset("ethos", tmp_path, **{"budget.turn_budget_chars": 8_000}) as pipe:
        (cut,) = outputs(pipe.process(batch(("terminal", text(20_000)))).messages)
        assert len(cut) <= 8_000 and "[truncated — 20000 chars total]" in cut
