"""Histories of agents that speak a text protocol (no structured tool calls): the
observations are plain user messages."""

from __future__ import annotations

from typing import Any


def mini(outputs: list[str], system: str = "You run bash.") -> list[dict[str, Any]]:
    """A mini-swe-agent history: one ```bash action and one observation per output."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Fix the bug."},
    ]
    for i, output in enumerate(outputs):
        messages += [
            {"role": "assistant", "content": f"THOUGHT: step {i}.\n\n```bash\ncat f{i}.py\n```"},
            {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{output}</output>"},
        ]
    return messages
