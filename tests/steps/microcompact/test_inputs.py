"""Old tool-call inputs (issue 17): the long strings of an old Write or Edit become pointers
to the spill file holding the whole input, at the schedule boundary, from their own age
(``microcompact.inputs.clear_turns``)."""

from __future__ import annotations

import json
import re
from typing import Any

import middleware

EVERY_TURN = {"microcompact": {"schedule": {"rewrite_cost": 0, "expected_turns_min": 0}}}
CONTENT = "".join(f"def function_{i}():\n    return {i}\n" for i in range(200))


def anthropic_session(turns: int = 5) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "write the module"}]
    for i in range(turns):
        name, args = (
            ("Write", {"file_path": "/src/mod.py", "content": CONTENT})
            if i == 0
            else ("Bash", {"command": f"pytest -k case_{i}"})
        )
        messages += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": name, "input": args}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": f"ok {i}"}],
            },
        ]
    return messages


def process(messages: list[dict[str, Any]], **overrides: Any) -> middleware.ProcessResult:
    policy = middleware.load_policy(
        env={}, dotenv_path=False, overrides={**EVERY_TURN, **overrides}
    )
    with middleware.Pipeline(policy, session_id="inputs") as pipe:
        result = pipe.process(messages)
        again = pipe.process(result.messages)
        assert again.messages == result.messages  # idempotent
        for action in result.report.actions:
            if action.kind == "input_cleared":
                original = pipe.spill.load(action.detail["path"])
                assert original is not None
                assert json.loads(original) == next(
                    m["content"][0]["input"]
                    for m in messages
                    if m["role"] == "assistant" and m["content"][0]["id"] == action.tool_call_id
                )
        return result


def test_an_old_writes_content_becomes_a_pointer_and_keeps_its_keys() -> None:
    messages = anthropic_session()
    result = process(messages)
    cleared = result.messages[1]["content"][0]["input"]
    assert cleared["file_path"] == "/src/mod.py"
    assert re.fullmatch(
        rf"\[Old input cleared: {len(CONTENT)} chars\. Full input: \S+\.json\]", cleared["content"]
    )
    kinds = [(a.kind, a.tool_call_id) for a in result.report.actions]
    assert ("input_cleared", "t0") in kinds
    assert messages == anthropic_session()  # the input is never mutated


def test_a_recent_write_and_other_tools_are_left_alone() -> None:
    messages = anthropic_session(turns=2)  # the Write is one turn old
    assert not [a for a in process(messages).report.actions if a.kind == "input_cleared"]
    no_tools = process(anthropic_session(), microcompact={"inputs": {"tools": []}})
    assert no_tools.messages[1]["content"][0]["input"]["content"] == CONTENT


def test_inputs_can_be_cleared_before_results_are_summarised() -> None:
    """With ``clear_turns`` 1, one turn later the Write's input is a pointer while the
    results of that turn stay whole (summarised from age 2); by default it waits too."""
    big = "".join(f"line {i}: value_{i}\n" for i in range(150))  # under the cap
    messages = anthropic_session(turns=2)
    messages[2]["content"][0]["content"] = big  # the Write's result, one turn old
    result = process(
        messages, microcompact={**EVERY_TURN["microcompact"], "inputs": {"clear_turns": 1}}
    )
    assert [(a.kind, a.tool_call_id) for a in result.report.actions] == [("input_cleared", "t0")]
    assert result.messages[2]["content"][0]["content"] == big
    later = process(messages)
    assert not later.report.actions
    assert later.messages[1]["content"][0]["input"]["content"] == CONTENT


def test_openai_arguments_stay_a_json_string() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(5):
        args = {"path": "a.py", "patch": CONTENT} if i == 0 else {"command": "ls"}
        name = "apply_patch" if i == 0 else "bash"
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args)}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "done"},
        ]  # fmt: skip
    policy = middleware.load_policy(env={}, dotenv_path=False, overrides=EVERY_TURN)
    with middleware.Pipeline(policy, session_id="inputs-openai") as pipe:
        result = pipe.process(messages)
        arguments = result.messages[1]["tool_calls"][0]["function"]["arguments"]
        assert isinstance(arguments, str)
        parsed = json.loads(arguments)
        assert parsed["path"] == "a.py" and parsed["patch"].startswith("[Old input cleared:")
        (action,) = [a for a in result.report.actions if a.kind == "input_cleared"]
        assert pipe.spill.load(action.detail["path"]) == json.dumps(
            {"path": "a.py", "patch": CONTENT}
        )
