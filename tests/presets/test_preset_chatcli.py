"""ChatCLI's tool result management through ``policies/presets/chatcli.yaml``, one test
per behaviour of the seed document."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import middleware
from tests.preset_builders import batch, outputs, preset, spilled_text

MISSING = (
    "[Tool result missing — the tool execution was interrupted or failed silently. "
    "Do NOT retry this tool call. Analyze what went wrong and try a different approach.]"
)


def results_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        b
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]


def test_a_call_without_result_gets_the_synthetic_error(tmp_path: Path) -> None:
    with preset("chatcli", tmp_path) as pipe:
        messages = batch(("read", "ok"), ("search", "ok"))
        del messages[-1]["content"][1]
        (_, synthetic) = results_of(pipe.process(messages).messages)
        assert synthetic == {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": MISSING,
            "is_error": True,
        }


def test_a_result_without_call_is_removed(tmp_path: Path) -> None:
    with preset("chatcli", tmp_path) as pipe:
        messages = batch(("read", "ok"))
        messages[-1]["content"].append(
            {"type": "tool_result", "tool_use_id": "ghost", "content": "x"}
        )
        result = pipe.process(messages)
        assert [r["tool_use_id"] for r in results_of(result.messages)] == ["t0"]
        (dropped,) = [a for a in result.report.actions if a.tool_call_id == "ghost"]
        assert dropped.detail  # the dropped content is in the report: nothing silently lost


def test_duplicate_call_ids_keep_only_the_first(tmp_path: Path) -> None:
    with preset("chatcli", tmp_path) as pipe:
        messages = batch(("read", "ok"))
        messages[1]["content"].append(dict(messages[1]["content"][0], name="read_again"))
        result = pipe.process(messages)
        uses = [b for b in result.messages[1]["content"] if b["type"] == "tool_use"]
        assert [u["name"] for u in uses] == ["read"]


@pytest.mark.parametrize(
    ("tool", "cap"),
    [("@read", 80_000), ("@search", 60_000), ("@tree", 50_000), ("@plugin", 20_000)],
)
def test_per_tool_caps(tmp_path: Path, tool: str, cap: int) -> None:
    with preset("chatcli", tmp_path) as pipe:
        result = pipe.process(batch((tool, "q" * (cap + 1))))
        (action,) = result.report.actions
        assert action.kind == "spilled" and action.detail["cap"] == cap
        assert len(outputs(result.messages)[0]) <= cap


def test_a_tool_that_opts_in_without_a_number_gets_30000(tmp_path: Path) -> None:
    class OptIn:
        @middleware.hookimpl
        def tool_result_cap(self, tool_name: str) -> middleware.ToolCap | None:
            return middleware.ToolCap() if tool_name == "@k8s" else None

    with preset("chatcli", tmp_path, OptIn()) as pipe:
        result = pipe.process(batch(("@k8s", "k" * 30_001)))
        assert result.report.actions[0].detail["cap"] == 30_000


def test_an_oversized_result_becomes_head_4000_marker_and_tail_1000(tmp_path: Path) -> None:
    line = "".join(chr(ord("a") + i % 26) for i in range(79)) + "\n"
    output = line * 1138  # 91,040 characters
    with preset("chatcli", tmp_path) as pipe:
        (text,) = outputs(pipe.process(batch(("run", output))).messages)
        assert spilled_text(text) == output
    match = re.fullmatch(
        r"(.*)\n\n\.\.\. \[(\d+) chars omitted — full output saved to (\S+)\]\n\n(.*)",
        text,
        re.DOTALL,
    )
    assert match is not None
    head, omitted, path, tail = match.groups()
    assert len(head) <= 4000 and head.endswith("\n")  # cut at the last line break
    assert len(tail) <= 1000 and tail.startswith(line[:10])  # starts at a line break
    assert int(omitted) == len(output) - len(head) - len(tail)
    assert re.search(r"/chatcli-agent-[^/]+/tool-results/t0-[0-9a-f]{16}\.txt$", path)


def test_a_turn_over_200000_is_brought_under_it(tmp_path: Path) -> None:
    with preset("chatcli", tmp_path) as pipe:
        result = pipe.process(batch(*((f"@read{i}", "r" * 19_000) for i in range(12))))
        assert sum(len(t) for t in outputs(result.messages)) <= 200_000


def aged_session(*outputs_by_turn: tuple[str, str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Work."}]
    for tool, output in outputs_by_turn:
        messages = batch((tool, output), before=messages)
    return messages


def test_microcompaction_by_age(tmp_path: Path) -> None:
    go = "package main\n\n" + "func f() {}\n" * 900  # 10,814 chars
    turns = [
        ("run", go),
        ("run", go + " "),
        ("run", go + "  "),
        ("run", "x" * 5000),
        ("run", "y" * 5000),
        ("run", "z"),
    ]
    with preset("chatcli", tmp_path) as pipe:
        result = pipe.process(aged_session(*turns))
        texts = [r["content"] for r in results_of(result.messages)]
    # ages 5 and 4: one line naming lines, size and type; age 3 and 2: head 2,000 + tail 500
    assert re.fullmatch(
        r"\[Old tool result cleared — 902 lines, 10814 chars, Go source\. Full output: \S+\]",
        texts[0],
    )
    assert texts[1].startswith("[Old tool result cleared — ")
    assert "chars omitted from old tool result" in texts[2] and len(texts[2]) < 2700
    assert "chars omitted from old tool result" in texts[3]
    assert texts[4:] == ["y" * 5000, "z"]  # the current and the previous turn stay whole


def test_small_results_errors_and_write_tools_are_never_compacted(tmp_path: Path) -> None:
    turns = [
        ("run", "s" * 2999),
        ("write", "w" * 9000),
        ("run", "a"),
        ("run", "b"),
        ("run", "c"),
        ("run", "d"),
    ]
    with preset("chatcli", tmp_path) as pipe:
        texts = [r["content"] for r in results_of(pipe.process(aged_session(*turns)).messages)]
    assert texts[:2] == ["s" * 2999, "w" * 9000]


@pytest.mark.parametrize(
    ("output", "kind"),
    [
        ('{"items": [' + ", ".join(["1"] * 2000) + "]}", "JSON"),
        ("package main\n" + "x := 1\n" * 600, "Go source"),
        ("def main():\n" + "    pass\n" * 600, "Python source"),
        ("function main() {\n" + "  run();\n" * 600 + "}", "JavaScript source"),
        ("diff --git a/f b/f\n--- a/f\n+++ b/f\n" + "+line\n" * 600, "diff"),
        ("commit " + "a" * 40 + "\nAuthor: A <a@b>\n" + "    msg\n" * 600, "git log"),
        ("plain words " * 400, "text"),
    ],
)
def test_summaries_name_the_content_type(tmp_path: Path, output: str, kind: str) -> None:
    turns = [("run", output), ("run", "a"), ("run", "b"), ("run", "c"), ("run", "d")]
    with preset("chatcli", tmp_path) as pipe:
        first = results_of(pipe.process(aged_session(*turns)).messages)[0]["content"]
    assert f" chars, {kind}. Full output: " in first


def test_chatcli_environment_variables_apply_to_the_preset(tmp_path: Path) -> None:
    env = {"CHATCLI_TOOL_RESULT_MAX_CHARS": "5000", "CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS": "6"}
    policy = middleware.load_policy("preset:chatcli", env=env, dotenv_path=False)
    assert policy.get("budget.max_result_chars") == 5000
    assert policy.get("microcompact.summarize_turns") == 6
    assert policy.origins["budget.max_result_chars"] == "env CHATCLI_TOOL_RESULT_MAX_CHARS"


@pytest.mark.parametrize("keep", [False, True])
def test_the_workspace_is_removed_at_session_end_unless_kept(tmp_path: Path, keep: bool) -> None:
    env = {"CHATCLI_AGENT_KEEP_TMPDIR": "true"} if keep else {}
    policy = middleware.load_policy(
        "preset:chatcli", env=env, dotenv_path=False, overrides={"spill.root": str(tmp_path)}
    )
    with middleware.Pipeline(policy, session_id="s1") as pipe:
        (text,) = outputs(pipe.process(batch(("run", "o" * 30_000))).messages)
        assert spilled_text(text) == "o" * 30_000
    assert (tmp_path / "chatcli-agent-s1").exists() is keep
