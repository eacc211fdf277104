"""The requests the console's tests send through a proxy (a Claude Code session: an output
big enough to be spilled, an interrupted call that the pairing step repairs) and how they
read the console's JSON back."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

SESSION = "0f6c7c52-console-session"
HEADERS = {
    "x-api-key": "sk-ant-test",
    "anthropic-version": "2023-06-01",
    "x-claude-code-session-id": SESSION,
    "user-agent": "claude-cli/2.1.197 (external, sdk-cli)",
}
MODEL = "claude-sonnet-4-5"


def big_output() -> str:
    return "".join(f"line {i:04d}: {'build step output ' * 5}\n" for i in range(400))


def spilled_turn() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Build it."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_build", "name": "Bash", "input": {"command": "make"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_build", "content": big_output()},
        ]},
    ]  # fmt: skip


def interrupted_turn() -> list[dict[str, Any]]:
    """The history after the agent was stopped in the middle of a call: the call has no
    result, and the user typed on."""
    return [
        *spilled_turn(),
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_slow", "name": "Bash", "input": {"command": "sleep"}},
        ]},
        {"role": "user", "content": "Go on."},
    ]  # fmt: skip


def interrupted_request(n: int) -> dict[str, Any]:
    """Request ``n`` of a session: a call of its own that has no result (a repair each)."""
    call = {"type": "tool_use", "id": f"toolu_{n:04d}", "name": "Bash", "input": {"n": n}}
    messages = [
        {"role": "user", "content": f"Step {n}."},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": "Go on."},
    ]
    return {"model": MODEL, "max_tokens": 10, "messages": messages}


def send_to(url: str, messages: list[dict[str, Any]], session: str = SESSION) -> httpx.Response:
    """``messages`` sent through the proxy at ``url`` as a request of ``session``."""
    body = {"model": MODEL, "max_tokens": 100, "messages": messages}
    headers = {**HEADERS, "x-claude-code-session-id": session}
    answer = httpx.post(url + "/v1/messages", json=body, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer


def get_json(url: str, path: str) -> Any:
    answer = httpx.get(url + path, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def session_path(session: str = SESSION, **query: Any) -> str:
    """The console's JSON of ``session`` (``query``: its cursors and limit)."""
    tail = "&".join(f"{key}={value}" for key, value in query.items())
    return f"/ui/api/sessions/{quote(session, safe='')}" + (f"?{tail}" if tail else "")
