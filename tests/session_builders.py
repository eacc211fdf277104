"""Small histories and pipelines the step tests share."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import middleware
from middleware.plugin.host import PluginHost


def tool_session(*outputs: tuple[str, str]) -> list[dict[str, Any]]:
    """OpenAI chat: one tool call per assistant turn, each answered by (tool, output)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Investigate."}]
    for i, (tool, output) in enumerate(outputs):
        call = {"id": f"c{i}", "type": "function", "function": {"name": tool, "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": output})
    return messages


def tool_turn(call_id: str, name: str, arguments: dict[str, Any], output: str) -> list[Any]:
    """One Anthropic assistant turn calling ``name``, and its result."""
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call_id, "content": output}],
        },
    ]


def pipeline_for(policy: Path, *plugins: object, session_id: str) -> middleware.Pipeline:
    """A pipeline on ``policy`` with the built-in steps and ``plugins``, no entry points."""
    host = PluginHost.create(load_entrypoints=False)
    for i, plugin in enumerate(plugins):
        host.register(plugin, name=f"plugin-{i}")
    return middleware.Pipeline.from_policy(policy, host=host, session_id=session_id)


def with_cache_marker(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An Anthropic history with ``cache_control`` on the last block of its last message,
    as Claude Code and the SDKs' automatic caching put it there on every request (a copy)."""
    out = copy.deepcopy(messages)
    last = out[-1]
    if isinstance(last["content"], str):
        last["content"] = [{"type": "text", "text": last["content"]}]
    last["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return out


def spilled(policy_overrides: dict[str, Any], text: str, session: str, root: Path) -> str:
    """The preview the default pipeline sends for one Bash result of ``text``."""
    history = [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "x"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": text}]},
    ]  # fmt: skip
    policy = middleware.load_policy(
        env={}, dotenv_path=False, overrides={"spill.root": str(root), **policy_overrides}
    )
    with middleware.Pipeline(policy, session_id=session) as pipe:
        out = pipe.process(history).messages[2]["content"][0]["content"]
        assert isinstance(out, str)
        return out


def listing(i: int, lines: int) -> str:
    """A search's output of ``lines`` lines, each naming a file and a value of result ``i``."""
    return "".join(
        f"src/mod_{i}/file_{n}.py:{n}: value_{i}_{n} = compute(x)\n" for n in range(lines)
    )


def long_results(turns: int = 12) -> list[Any]:
    """A session whose results are over the cap (previews with an outline) or old enough to
    be weighed for a summary, all longer than the shortest text whose readings are kept."""
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for i in range(turns):
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": "ls"}},
        ]})  # fmt: skip
        text = listing(i, 400 if i % 3 == 0 else 90)
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": text},
        ]})  # fmt: skip
    return messages


def replay(
    pipe: middleware.Pipeline, requests: list[list[dict[str, Any]]]
) -> list[tuple[str, str]]:
    """The output and the report of every request, as JSON."""
    return [
        (json.dumps(result.output), result.report.to_json())
        for result in (pipe.process(r, format="anthropic") for r in requests)
    ]
