"""Claude Code's three-layer tool result flow through
``policies/presets/claude-code.yaml``, one test per claim of the seed document."""

from __future__ import annotations

import re
from pathlib import Path

import middleware
from middleware import ToolCap, hookimpl
from tests.preset_builders import batch, outputs, preset, spilled_text


class DeclaredCaps:
    """Tools declaring maxResultSizeChars on their ToolDef."""

    @hookimpl
    def tool_result_cap(self, tool_name: str) -> ToolCap | None:
        return {"WebFetch": ToolCap(100_000), "Grep": ToolCap(20_000)}.get(tool_name)


def lines_of(n: int, width: int = 60) -> str:
    return "".join(f"{i:08d} " + "x" * (width - 10) + "\n" for i in range(n))


def test_per_tool_threshold_is_the_declared_cap_clamped_to_50000(tmp_path: Path) -> None:
    with preset("claude-code", tmp_path, DeclaredCaps()) as pipe:
        fetch, grep, bash = lines_of(1000), lines_of(400), lines_of(800)  # 60k, 24k, 48k
        result = pipe.process(batch(("WebFetch", fetch), ("Grep", grep), ("Bash", bash)))
        spilled = {
            a.tool_name: a.detail["cap"] for a in result.report.actions if a.kind == "spilled"
        }
        assert spilled == {"WebFetch": 50_000, "Grep": 20_000}  # Bash (48k) is under 50k
        assert outputs(result.messages)[2] == bash


def test_a_policy_override_wins_over_the_declaration_and_the_clamp(tmp_path: Path) -> None:
    with preset(
        "claude-code", tmp_path, DeclaredCaps(), **{"tools.WebFetch": {"max_chars": 120_000}}
    ) as pipe:
        fetch = lines_of(1500)  # 90k: over the clamp, under the override
        result = pipe.process(batch(("WebFetch", fetch)))
        assert outputs(result.messages) == [fetch]


def test_persisted_output_block_has_size_path_and_a_2000_byte_preview_cut_at_a_newline(
    tmp_path: Path,
) -> None:
    with preset("claude-code", tmp_path) as pipe:
        output = lines_of(1000, width=70)  # 70,000 characters in 70-byte lines
        (text,) = outputs(pipe.process(batch(("Bash", output))).messages)
        assert spilled_text(text) == output
    match = re.fullmatch(
        r"<persisted-output>\nOutput too large \(70\.0 KB\)\. Full output saved to: (\S+)\n"
        r"Lines 29-1000 of 1000 are not shown: read them with the Read tool \(file_path (\S+), "
        r"offset 29, limit 571\) for lines 29-599, then lines 600-1000 the same way, 571 lines "
        r"at a time, before acting on them\.\n\n"
        r"Preview \(first 2KB\):\n(.*)\n\.\.\.\n</persisted-output>",
        text,
        re.DOTALL,
    )
    assert match is not None, text[:300]
    assert "t0" in Path(match.group(1)).name  # named after the tool_use_id
    assert match.group(2) == match.group(1)  # read back with Claude Code's Read tool
    preview = match.group(3)
    assert len(preview.encode()) <= 2000
    assert preview.endswith("\n") and output.startswith(preview)  # whole lines only
    assert len(preview) == 2000 // 70 * 70


def test_the_preview_counts_bytes_not_characters(tmp_path: Path) -> None:
    with preset("claude-code", tmp_path) as pipe:
        output = "ü" * 60_000  # 120,000 bytes, no newline to cut at
        (text,) = outputs(pipe.process(batch(("Bash", output))).messages)
    preview = text.split("Preview (first 2KB):\n", 1)[1].split("\n...\n", 1)[0]
    assert preview == "ü" * 1000


def test_a_message_over_200000_evicts_its_largest_results_first(tmp_path: Path) -> None:
    with preset("claude-code", tmp_path) as pipe:
        sizes = [49_000, 48_000, 47_000, 46_000, 45_000]  # 235k together, each under 50k
        calls = [(f"tool{i}", "y" * n) for i, n in enumerate(sizes)]
        result = pipe.process(batch(*calls))
        spilled = [a.tool_name for a in result.report.actions if a.kind == "spilled"]
        assert spilled == ["tool0"]  # 235k - 49k + preview fits in 200k
        texts = outputs(result.messages)
        assert texts[0].startswith("<persisted-output>")
        assert sum(len(t) for t in texts) <= 200_000


def test_ten_parallel_40k_results_fit_the_message_budget(tmp_path: Path) -> None:
    with preset("claude-code", tmp_path) as pipe:
        result = pipe.process(batch(*((f"read{i}", "z" * 40_000) for i in range(10))))
        texts = outputs(result.messages)
        assert sum(len(t) for t in texts) <= 200_000
        # Five evictions leave 200k plus five previews: a sixth is needed.
        assert sum(t.startswith("<persisted-output>") for t in texts) == 6


def test_an_empty_result_says_the_tool_completed_with_no_output(tmp_path: Path) -> None:
    with preset("claude-code", tmp_path) as pipe:
        result = pipe.process(batch(("Bash", ""), ("Edit", "  \n")))
        assert outputs(result.messages) == [
            "(Bash completed with no output)",
            "(Edit completed with no output)",
        ]


def test_read_is_never_persisted_again(tmp_path: Path) -> None:
    with preset("claude-code", tmp_path) as pipe:
        output = lines_of(2000)
        assert outputs(pipe.process(batch(("Read", output))).messages) == [output]


def test_decisions_never_change_once_made_even_after_a_policy_change(tmp_path: Path) -> None:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(f"version: 1\nextends: preset:claude-code\nspill:\n  root: {tmp_path}\n")
    kept, spilled = lines_of(600), lines_of(1000)  # 36k (kept) and 60k (persisted)
    first = batch(("Bash", kept), ("WebFetch", spilled))
    with middleware.Pipeline.from_policy(policy_file, watch=True) as pipe:
        before = outputs(pipe.process(first).messages)
        assert before[0] == kept and before[1].startswith("<persisted-output>")
        policy_file.write_text(
            f"version: 1\nextends: preset:claude-code\nspill:\n  root: {tmp_path}\n"
            "budget:\n  max_result_chars: 10000\n  per_tool_default_chars: 10000\n"
            "tools:\n  WebFetch: {max_chars: 100000}\n"
        )
        assert pipe.reload_policy()
        later = batch(
            ("Bash", lines_of(600)),
            before=[
                *first,
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "more"},
            ],
        )
        result = pipe.process(later)
        texts = [
            b["content"]
            for m in result.messages
            if isinstance(m["content"], list)
            for b in m["content"]
            if b["type"] == "tool_result"
        ]
        assert texts[:2] == before  # the old results stay exactly as first sent
        assert texts[2].startswith("<persisted-output>")  # the new one follows the new policy
        assert [a.kind for a in result.report.actions].count("decision_replayed") == 1
        exported = pipe.decisions.export()
    # A resumed session restores the decisions and sends the same bytes.
    with middleware.Pipeline.from_policy(policy_file, decisions=exported) as resumed:
        again = resumed.process(later)
        assert again.messages == result.messages


def test_json_output_is_persisted_as_a_json_file(tmp_path: Path) -> None:
    with preset("claude-code", tmp_path) as pipe:
        output = "[" + ", ".join(f'{{"id": {i}, "name": "row {i}"}}' for i in range(3000)) + "]"
        (text,) = outputs(pipe.process(batch(("mcp_query", output))).messages)
        path = re.search(r"saved to: (\S+)", text)
        assert path is not None and path.group(1).endswith(".json")
        assert spilled_text(text) == output
