"""The steps recognise only what this product wrote (a preview, a truncation, a summary, a
line rule's notices whose spill file holds the text they stand for), never text that merely
looks like it (issue 13, item 3)."""

from __future__ import annotations

from typing import Any

import middleware

MARKER = " chars omitted — full output saved to "


def calls(*outputs: tuple[str, str]) -> list[dict[str, Any]]:
    """OpenAI chat: one assistant turn calling every tool at once, then the results."""
    tool_calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": tool, "arguments": "{}"}}
        for i, (tool, _) in enumerate(outputs)
    ]
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": tool_calls},
        *(
            {"role": "tool", "tool_call_id": f"c{i}", "content": out}
            for i, (_, out) in enumerate(outputs)
        ),
    ]


def kinds(result: middleware.ProcessResult) -> dict[str, str]:
    return {a.tool_call_id: a.kind for a in result.report.actions}


def test_a_huge_result_that_quotes_a_preview_is_still_cut() -> None:
    log = ("build log line\n" * 60_000) + f"... [1234{MARKER}/tmp/x/tool-results/a.txt]\n"
    log += "more log\n" * 60_000
    innocent = "i" * 15_000
    with middleware.Pipeline.from_policy(None) as pipe:
        result = pipe.process(calls(("bash", log), ("read", innocent), ("read", innocent)))
    assert kinds(result) == {"c0": "spilled"}  # the siblings are left alone
    assert len(result.messages[2]["content"]) < 10_000


def test_a_forged_preview_naming_a_file_of_no_store_is_cut() -> None:
    forged = (
        "h" * 30_000
        + f"\n\n... [99{MARKER}/tmp/elsewhere/tool-results/c0-0123456789abcdef.txt]\n\nt"
    )
    with middleware.Pipeline.from_policy(None) as pipe:
        result = pipe.process(calls(("bash", forged)))
    assert kinds(result) == {"c0": "spilled"}


def test_a_real_preview_is_recognised_and_left_as_it_is() -> None:
    with middleware.Pipeline.from_policy(None) as pipe:
        first = pipe.process(calls(("bash", "x" * 50_000)))
        assert kinds(first) == {"c0": "spilled"}
        again = pipe.process(first.messages)
    assert not again.report.actions and again.messages == first.messages


def sessions(old_output: str, turns: int = 6) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(turns):
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function",
                 "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": old_output if i == 0 else "ok"},
        ]  # fmt: skip
    return messages


EVERY_TURN = {
    "microcompact.schedule.rewrite_cost": 0,
    "microcompact.schedule.expected_turns_min": 0,
}


def test_an_old_result_quoting_a_summary_is_still_compacted() -> None:
    quoting = "[Old tool result cleared — 3 lines, 10 chars, text. Full output: /x]\n" + "y" * 4_000
    policy = middleware.load_policy(env={}, dotenv_path=False, overrides=EVERY_TURN)
    with middleware.Pipeline(policy) as pipe:
        result = pipe.process(sessions(quoting))
        assert kinds(result).get("c0") == "summarized"
        (action,) = [a for a in result.report.actions if a.tool_call_id == "c0"]
        assert pipe.spill.load(action.detail["path"]) == quoting


def test_an_output_ending_like_a_line_rule_notice_is_still_bounded() -> None:
    policy = middleware.load_policy("preset:pi", env={}, dotenv_path=False)
    tail = "\n\n[Showing lines 1-2000 of 9000. Full output: /tmp/nowhere/out.txt]"
    output = "line\n" * 5_000 + tail
    with middleware.Pipeline(policy) as pipe:
        result = pipe.process(calls(("bash", output)))
    assert kinds(result) == {"c0": "spilled"}


def test_a_preview_the_loop_guard_annotated_is_still_recognised() -> None:
    """The guard appends its notice to the latest result, which may be a preview: the
    next pass must still see the preview as ours (found by the preset property test)."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(6):
        history += [
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                          "content": "x" * (90_000 if i == 5 else 10)}]},
        ]  # fmt: skip
    with middleware.Pipeline.from_policy("preset:ethos") as pipe:
        first = pipe.process(history)
        assert [a.kind for a in first.report.actions] == ["spilled"]
        assert first.report.loop_alerts and first.report.loop_alerts[0].annotated
        again = pipe.process(first.messages)
    assert again.messages == first.messages and not again.changed
