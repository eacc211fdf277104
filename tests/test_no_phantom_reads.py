"""No phantom reads, on the requests the four CLIs really send when their model reads a
file and edits it (tests/recorded/*-read.json): under the default policy the read the edit
came from reaches the model whole; and whatever reaches it cut or compacted says, in the
words of the CLI's own tools, that it is not the whole text and how to get it before acting
on it: the read tool and the file for a file read, the command that read it for a shell
agent's read (``sed -n '1,300p' FILE``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from locations import REPO

import middleware

RECORDED = REPO / "tests" / "recorded"
#: Each CLI's recording, its read tool (None: it reads with its shell) and the words a
#: partial read's summary gives (the recorded call's range arguments).
CLIS = {
    "claude-code": ("claude-code-2.1.197-read.json", "Read", " (offset: 120, limit: 30)"),
    "opencode": ("opencode-1.18.33-read.json", "read", " (offset: 120, limit: 30)"),
    "gemini-cli": ("gemini-cli-0.61.0-read.json", "read_file", " (start_line: 120, end_line: 149)"),
    "codex": ("codex-0.171.0-read.json", None, ""),
}


def recorded(cli: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The CLI's last recorded request (the read, a part read again, the edit, its
    answer) and what the recording says of the file."""
    recording = json.loads((RECORDED / CLIS[cli][0]).read_text("utf-8"))
    body: dict[str, Any] = recording["requests"][-1]["body"]
    return body, recording["file"]


def outputs(body: dict[str, Any]) -> list[str]:
    """Every tool result's text in the body, in order, whatever the format."""
    found: list[str] = []
    for item in body.get("messages") or body.get("input") or body.get("contents") or []:
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            found.append(item["output"])
        for part in item.get("content") or item.get("parts") or []:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "tool_result":
                content = part["content"]
                found.append(content if isinstance(content, str) else content[0]["text"])
            response = part.get("functionResponse")
            if response is not None:
                found.append(response["response"]["output"])
    return found


def cleaned(body: dict[str, Any], tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    policy = middleware.load_policy(
        None,
        env={},
        dotenv_path=False,
        overrides={"spill.root": str(tmp_path), "spill.keep": True, **overrides},
    )
    with middleware.Pipeline(policy, session_id="rec") as pipe:
        output: dict[str, Any] = pipe.process(body).output
    return output


@pytest.mark.parametrize("cli", sorted(CLIS))
def test_the_default_sends_the_read_an_edit_came_from_whole(cli: str, tmp_path: Path) -> None:
    body, file = recorded(cli)
    before, after = outputs(body), outputs(cleaned(body, tmp_path))
    read = next(i for i, text in enumerate(before) if "ROW_0300" in text)  # the whole file
    # A read tool's result, and a shell agent's read (21,600 characters, over the 5,000 of
    # a command's output but under the 30,000 a read through a shell keeps): whole.
    assert after[read] == before[read]
    assert file["lines"] == 300


def said_again(path: str, command: str) -> str:
    """What a cut or compacted read of Codex's shell says to do."""
    return (
        f"[Not all of {path} is shown: read it again with exec_command "
        f"(cmd: {json.dumps(command)}) before acting on it]"
    )


@pytest.mark.parametrize("cli", sorted(CLIS))
def test_a_compacted_read_says_to_read_the_file_again_with_the_clis_tool(
    cli: str, tmp_path: Path
) -> None:
    """With reads compacted as soon as they are a turn old, each read's summary names the
    file and the CLI's read tool (and the part a partial read read); a shell agent's read
    names the command that read the file."""
    body, file = recorded(cli)
    out = outputs(cleaned(body, tmp_path, **{
        "microcompact.reads.protect_turns": 0, "microcompact.reads.protect_part_turns": 0,
        "microcompact.summarize_turns": 1,
        "microcompact.truncate_turns": 1, "microcompact.schedule.rewrite_cost": 0,
    }))  # fmt: skip
    _, tool, part = CLIS[cli]
    summaries = [text for text in out if text.startswith("[Old tool result cleared")]
    assert len(summaries) >= 2, out
    whole, partial = summaries[0], summaries[1]
    if tool is None:  # Codex reads with its shell: the commands that read the file
        path = file["path"]
        assert said_again(path, f"sed -n '1,300p' {path}") in whole
        assert said_again(path, f"cat {path}") in partial
        return
    path = file["path"]
    assert f"[Not all of {path} is shown: read it again with {tool} before acting on it]" in whole
    assert f"read it again with {tool}{part} before acting on it]" in partial
    assert "Mentions:" not in whole  # the file is what the model reads, not a token list
