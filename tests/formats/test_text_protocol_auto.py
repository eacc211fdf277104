"""``text_protocol.enabled: auto`` recognises mini-swe-agent and SWE-agent (text mode) from
the history alone, never a history with structured tool calls or a plain chat, and gives
them the treatment the explicit setting would."""

from __future__ import annotations

from pathlib import Path
from typing import Any, SupportsIndex

import pytest

import middleware
from middleware.formats.text_protocol import (
    MINI_SWE_AGENT,
    SWE_AGENT,
    WINDOW,
    AutoTextProtocol,
    has_command_block,
)
from middleware.policy import load_policy
from middleware.replay.transcripts import MINI_SWE_AGENT_RULE
from middleware.view import Node
from tests.text_agent_builders import mini

FOOTER = "\n(Open file: n/a)\n(Current directory: /repo)\nbash-$"


def swe(outputs: list[str]) -> list[dict[str, Any]]:
    """A SWE-agent text-mode history: a fenced command, an observation with its footer."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "SETTING: you work in a special interface."},
        {"role": "user", "content": "ISSUE: it fails."},
    ]
    for i, output in enumerate(outputs):
        messages += [
            {"role": "assistant", "content": f"Let's look.\n```\nopen f{i}.py\n```"},
            {"role": "user", "content": output + FOOTER},
        ]
    return messages


def run(messages: list[Any], policy: Any = None, **overrides: Any) -> middleware.ProcessResult:
    """Process ``messages`` once (one session id: spill paths compare equal across runs)."""
    loaded = load_policy(policy, env={}, dotenv_path=False, overrides=overrides)
    with middleware.Pipeline.from_policy(loaded, session_id="auto-test") as pipe:
        return pipe.process(messages)


def test_mini_swe_agent_is_recognised_from_its_first_exchange() -> None:
    """The first observation may already be over the budget: it is treated as the explicit
    setting treats it."""
    assert run(mini([])).report.text_protocol is None  # no exchange yet
    report = run(mini(["a.py\n"])).report
    assert report.text_protocol == "recognised mini-swe-agent (<returncode> observations)"
    assert report.tool_results == 1
    assert run(mini(["a.py\n", "b.py\n"])).report.tool_results == 2


def test_swe_agent_is_recognised_from_its_first_exchange() -> None:
    assert run(swe([])).report.text_protocol is None
    report = run(swe(["a.py"])).report
    assert report.text_protocol is not None and report.text_protocol.startswith("recognised SWE")
    report = run(swe(["a.py", "1:print()"])).report
    assert report.text_protocol is not None and report.text_protocol.startswith("recognised SWE")
    assert report.tool_results == 2


def test_the_footer_may_carry_more_state_lines() -> None:
    """BabyTimeCapsule's observations add ``(Interactive session: ...)`` to the footer."""
    text = "out\n(Open file: a)\n(Current directory: /x)\n(Interactive session: n/a)\nbash-$"
    assert SWE_AGENT.observes(text) and not SWE_AGENT.observes(text + "\nmore")
    assert SWE_AGENT.observes("(Open file: n/a)\n(Current directory: /x)\nbash-$\n")


@pytest.mark.parametrize(
    ("build", "tool"), [(mini, "bash"), (swe, "swe_agent_action")], ids=["mini", "swe"]
)
def test_outputs_take_the_tool_name_of_the_explicit_rule(build: Any, tool: str) -> None:
    """Per-tool settings apply as they would with the explicit setting."""
    messages = build(["x" * 60_000, "y" * 10, "z" * 10])  # over a read's 30,000 too
    spilled = [a for a in run(messages).report.actions if a.kind == "spilled"]
    assert [a.tool_name for a in spilled] == [tool]
    capped = run(messages, **{f"tools.{tool}.max_chars": 1_000})
    assert sum(a.kind == "spilled" for a in capped.report.actions) == 1
    assert len(capped.messages[3]["content"]) < 2_000


def test_a_plain_chat_with_code_blocks_is_never_recognised() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "How do I list files?"}]
    for _ in range(4):
        messages += [
            {"role": "assistant", "content": "Run this:\n```bash\nls -la\n```\nIt lists them."},
            {"role": "user", "content": "Thanks, and what does -a do? " + "x" * 30_000},
        ]
    result = run(messages)
    assert result.report.text_protocol is None and result.messages == messages


def test_observation_shapes_need_a_command_before_them() -> None:
    """A user pasting ``<returncode>`` outputs in reply to prose is not an agent."""
    messages = mini(["a\n", "b\n", "c\n"])
    for message in messages:
        if message["role"] == "assistant":
            message["content"] = "Please run the command and paste what it prints."
    assert run(messages).report.text_protocol is None
    assert has_command_block("x\n<command>\nls\n</command>")
    assert not has_command_block("inline ```ls``` only")


STRUCTURED: dict[str, list[dict[str, Any]]] = {
    "openai tool_calls": [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    ],
    "openai role tool alone": [{"role": "tool", "tool_call_id": "c9", "content": "a.py"}],
    "anthropic tool_use": [
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]},
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(STRUCTURED))
def test_any_structured_tool_call_or_result_rules_it_out(name: str) -> None:
    messages = mini(["x" * 30_000, "b\n", "c\n"]) + STRUCTURED[name]
    fmt = "anthropic" if name.startswith("anthropic") else "openai"
    if fmt == "anthropic":
        messages = messages[1:]  # Anthropic histories carry no system message
    loaded = load_policy(None, env={}, dotenv_path=False)
    with middleware.Pipeline.from_policy(loaded) as pipe:
        result = pipe.process(messages, format=fmt)
    assert result.report.text_protocol is None
    assert not [a for a in result.report.actions if a.tool_name == "bash"]


def test_responses_function_calls_rule_it_out() -> None:
    observation = "<returncode>0</returncode>" + "x" * 30_000
    items: list[dict[str, Any]] = []
    for _ in range(3):
        items += [
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "```bash\nls\n```"}]},
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": observation}]},
        ]  # fmt: skip
    with middleware.Pipeline.from_policy(None) as pipe:
        assert pipe.process(items, format="responses").report.text_protocol is not None
        items += [
            {"type": "function_call", "call_id": "f1", "name": "ls", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "f1", "output": "a.py"},
        ]
        assert pipe.process(items, format="responses").report.text_protocol is None


def test_explicit_settings_win() -> None:
    messages = mini(["x" * 60_000, "b\n", "c\n"])
    off = run(messages, **{"text_protocol.enabled": False})
    assert off.report.text_protocol is None and off.messages == messages
    mine = run(messages, **{"text_protocol.enabled": True, "text_protocol.tool_name": "shell"})
    assert mine.report.text_protocol == "policy rule"
    assert {a.tool_name for a in mine.report.actions} == {"shell"}
    assert run(messages, **MINI_SWE_AGENT_RULE).messages == run(messages).messages


def test_a_processed_history_is_recognised_again_and_left_as_it_is() -> None:
    """Compaction rewrites the old observations (of commands that read no file: reads
    are kept whole longer); the last turns' are kept, so the output is still a
    mini-swe-agent history and processing it again changes nothing."""
    messages = mini([f"line {i}\n" * 400 for i in range(12)], command="python check_{i}.py")
    with middleware.Pipeline.from_policy(None) as pipe:
        first = pipe.process(messages)
        assert {a.kind for a in first.report.actions} == {"summarized"}
        again = pipe.process(first.messages)
    assert again.report.text_protocol == first.report.text_protocol is not None
    assert again.messages == first.messages and not again.report.actions


class Watched(str):
    """A text that records how it is read: each index or slice taken of it."""

    reads: list[slice | int]

    def __getitem__(self, key: SupportsIndex | slice) -> str:
        self.reads.append(key if isinstance(key, slice) else int(key))
        return super().__getitem__(key)


def test_recognition_reads_only_the_ends_of_a_huge_observation() -> None:
    """Not a timing: the observation is read only as a slice of at most ``WINDOW``
    characters at one end, so a 50 MB output costs what a small one does."""
    huge = Watched("<returncode>0</returncode>\n<output>\n" + "x" * 50_000_000 + "\n</output>")
    huge.reads = []
    nodes_text = {0: "```bash\nls\n```", 1: huge, 2: "```bash\nls\n```", 3: huge}
    nodes = [Node("assistant"), Node("user"), Node("assistant"), Node("user")]
    agent = AutoTextProtocol().recognise(nodes, nodes_text.__getitem__)
    assert agent is MINI_SWE_AGENT
    assert huge.reads
    for read in huge.reads:
        assert isinstance(read, slice), read
        start, stop, _ = read.indices(len(huge))
        assert stop - start <= WINDOW and (start == 0 or stop == len(huge)), read
    assert not SWE_AGENT.observes(huge)


def test_the_default_policy_says_auto() -> None:
    assert load_policy(None, env={}, dotenv_path=False).get("text_protocol.enabled") == "auto"
    env = {"CHATCLI_TEXT_PROTOCOL__ENABLED": "off"}
    assert load_policy(None, env=env, dotenv_path=False).get("text_protocol.enabled") is False


def test_a_policy_file_may_say_auto(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\ntext_protocol:\n  enabled: auto\n")
    assert load_policy(path, env={}, dotenv_path=False).get("text_protocol.enabled") == "auto"
