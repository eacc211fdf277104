"""What the tests of kept file reads share: a policy that compacts on every turn, an
Anthropic history of tool turns, and the results a processed one carries by call id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from session_builders import tool_turn

import middleware


def policy(tmp_path: Path, **microcompact: Any) -> Path:
    """The default policy, compacting on every turn (no cache gate), in ``tmp_path``."""
    document: dict[str, Any] = {
        "version": 1,
        "spill": {"root": str(tmp_path / "spill")},
        "microcompact": {"schedule": {"rewrite_cost": 0}, **microcompact},
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "policy.yaml"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def turn(i: int, name: str, arguments: dict[str, Any], output: str) -> list[dict[str, Any]]:
    """One Anthropic assistant turn calling ``name``, and its result."""
    return tool_turn(f"toolu_{i:02d}", name, arguments, output)


def history(*turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the bug in app.py."}]
    for t in turns:
        messages += t
    return messages


def results(messages: list[dict[str, Any]]) -> dict[str, str]:
    """Each tool result's content by its call id."""
    out = {}
    for message in messages:
        for block in message["content"] if isinstance(message["content"], list) else ():
            if block.get("type") == "tool_result":
                out[block["tool_use_id"]] = block["content"]
    return out


def process(
    tmp_path: Path, messages: list[dict[str, Any]], *, session: str = "rd", **microcompact: Any
) -> dict[str, str]:
    """The results of ``messages`` processed under :func:`policy`."""
    path = policy(tmp_path, **microcompact)
    with middleware.Pipeline.from_policy(path, session_id=session) as pipe:
        return results(pipe.process(messages, format="anthropic").messages)
