"""Hermes' context-aware tool result budget (PR #6339) through
``policies/presets/hermes.yaml``, one test per behaviour the seed document describes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.preset_builders import batch, outputs, preset, spilled_text

WINDOW = "budget.context_aware.window_tokens"


def lines(n_chars: int, tag: str = "row") -> str:
    line = f"{tag} " + "d" * 75 + "\n"
    return (line * (n_chars // len(line) + 1))[:n_chars]


def session(*sizes: int) -> list[dict[str, Any]]:
    """One bash call per turn with results of ``sizes`` characters."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Look around."}]
    for i, size in enumerate(sizes):
        messages = batch((f"bash{i}", lines(size, f"turn{i}")), before=messages)
    return messages


def caps(result: Any) -> dict[str | None, int]:
    return {a.tool_name: a.detail["cap"] for a in result.report.actions if a.kind == "spilled"}


def test_budget_is_the_baseline_when_the_context_is_empty(tmp_path: Path) -> None:
    with preset("hermes", tmp_path, **{WINDOW: 32_768}) as pipe:  # Gemma 4 31B
        result = pipe.process(session(40_000))
        assert caps(result) == {"bash0": 32_768}  # 25% of 32K tokens x 4 chars
        assert pipe.result_budget("bash", context_chars=0) == 32_768


def test_budget_is_the_available_context_when_that_is_smaller(tmp_path: Path) -> None:
    overrides = {WINDOW: 32_768, "budget.context_aware.compact_before_spill": False}
    with preset("hermes", tmp_path, **overrides) as pipe:
        result = pipe.process(session(25_000, 25_000, 25_000, 25_000, 35_000))
        assert pipe.result_budget("bash", context_chars=100_000) == 131_072 - 100_000
        assert 30_000 < caps(result)["bash4"] < 131_072 - 100_000 < 32_768


def test_budget_never_goes_below_the_floor(tmp_path: Path) -> None:
    with preset("hermes", tmp_path, **{WINDOW: 32_768}) as pipe:
        assert pipe.result_budget("bash", context_chars=200_000) == 8_000  # 2,000 tokens


@pytest.mark.parametrize("window", [131_072, 200_000, 1_000_000])
def test_on_large_context_models_the_budget_never_triggers(tmp_path: Path, window: int) -> None:
    with preset("hermes", tmp_path, **{WINDOW: window}) as pipe:
        messages = session(30_000, 60_000, 90_000)
        assert pipe.process(messages).messages == messages


def test_context_is_compacted_before_a_result_is_spilled(tmp_path: Path) -> None:
    sizes = (30_000, 30_000, 30_000, 30_000, 30_000)
    with preset("hermes", tmp_path, **{WINDOW: 32_768}) as pipe:
        result = pipe.process(session(*sizes))
        kinds = [(a.step, a.kind, a.tool_name) for a in result.report.actions]
        assert ("microcompact", "summarized", "bash0") in kinds
        assert ("microcompact", "summarized", "bash1") in kinds
        assert outputs(result.messages) == [lines(30_000, "turn4")]  # no spill needed
        old = result.messages[2]["content"][0]["content"]
        assert old.startswith("[Old tool output cleared to save context space. Full output: /")
        assert spilled_text(old) == lines(30_000, "turn0")
        assert pipe.process(result.messages).messages == result.messages
    off = {WINDOW: 32_768, "budget.context_aware.compact_before_spill": False}
    with preset("hermes", tmp_path, **off) as pipe:
        result = pipe.process(session(*sizes))
        assert caps(result)["bash4"] < 12_000  # without compaction: what the window has left


def test_the_preview_is_a_persisted_output_block_that_says_how_to_page(tmp_path: Path) -> None:
    with preset("hermes", tmp_path, **{WINDOW: 32_768}) as pipe:
        output = lines(50_000, "turn0")
        (text,) = outputs(pipe.process(session(50_000)).messages)
        assert spilled_text(text) == output
    assert text.startswith("<persisted-output>\nThis tool result was too large (50000 characters")
    assert "Use read_file with offset and limit" in text
    preview = text.split("Preview (first 1500 characters):\n", 1)[1].split("...\n</persisted", 1)[0]
    assert len(preview) <= 1500 and preview.endswith("\n") and output.startswith(preview)


def test_a_turns_decision_depends_only_on_the_history_before_it(tmp_path: Path) -> None:
    overrides = {WINDOW: 32_768, "budget.context_aware.compact_before_spill": False}
    with preset("hermes", tmp_path, **overrides) as pipe:
        early = pipe.process(session(25_000, 25_000, 25_000, 25_000, 30_000)).messages
        later = pipe.process(session(25_000, 25_000, 25_000, 25_000, 30_000, 500)).messages
        assert later[: len(early)] == early


def test_read_file_is_budgeted_like_any_tool(tmp_path: Path) -> None:
    # PR #6339 removes read_file's infinite threshold: the budget layer protects it.
    with preset("hermes", tmp_path, **{WINDOW: 32_768}) as pipe:
        (text,) = outputs(pipe.process(batch(("read_file", lines(60_000)))).messages)
        assert text.startswith("<persisted-output>")


def test_a_small_result_in_a_tight_context_compacts_nothing(tmp_path: Path) -> None:
    with preset("hermes", tmp_path, **{WINDOW: 32_768}) as pipe:
        messages = session(30_000, 30_000, 30_000, 30_000, 2_000)
        assert pipe.process(messages).messages == messages  # no cache break for nothing


def test_mcp_tools_get_50000(tmp_path: Path) -> None:
    with preset("hermes", tmp_path) as pipe:
        result = pipe.process(batch(("mcp_github_search", lines(60_000)), ("bash", lines(60_000))))
        (action,) = [a for a in result.report.actions if a.kind == "spilled"]
        assert (action.tool_name, action.detail["cap"]) == ("mcp_github_search", 50_000)
        assert action.detail["cap_source"].endswith("tools.mcp_*.max_chars")
