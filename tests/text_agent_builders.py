"""Histories of agents that speak a text protocol (no structured tool calls): the
observations are plain user messages."""

from __future__ import annotations

from typing import Any


def mini(
    outputs: list[str], system: str = "You run bash.", command: str = "cat f{i}.py"
) -> list[dict[str, Any]]:
    """A mini-swe-agent history: one ```bash action (``command``, ``{i}`` its number) and
    one observation per output. The default command reads a file: its output is a file
    read, which microcompaction keeps whole for a while."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Fix the bug."},
    ]
    for i, output in enumerate(outputs):
        messages += [
            {
                "role": "assistant",
                "content": f"THOUGHT: step {i}.\n\n```bash\n{command.format(i=i)}\n```",
            },
            {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{output}</output>"},
        ]
    return messages
