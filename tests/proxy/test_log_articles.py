"""What the proxy and a wrapped SDK client log names a format without a wrong article:
never "a anthropic" or "a openai" (issue 36, item 12), read from the log lines they write
while they work over loopback; and a pairing reason naming a wire type reads right too."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from proxy_stack import running
from stand_in import Provider

import middleware

ANTHROPIC = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
OPENAI = {"authorization": "Bearer sk-test"}
#: The guard raises on a turn of more than two calls: processing fails, the request goes on.
LOOPING = {"loop_guard.action": "raise", "loop_guard.max_calls_per_turn": 2}
WRONG = re.compile(r"\ba (anthropic|openai|responses?|gemini|apply_patch\w*)\b", re.IGNORECASE)


def bash(uid: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": uid, "name": "Bash", "input": {"command": f"ls {uid}"}}


def ran(uid: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": uid, "content": "a.txt"}


UNANSWERED = [
    {"role": "user", "content": "List the files."},
    {"role": "assistant", "content": [bash("toolu_1")]},
    {"role": "user", "content": "Go on."},
]
THREE_CALLS = [
    {"role": "user", "content": "List the files, thrice."},
    {"role": "assistant", "content": [bash("toolu_1"), bash("toolu_2"), bash("toolu_3")]},
    {"role": "user", "content": [ran("toolu_1"), ran("toolu_2"), ran("toolu_3")]},
]


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("middleware")]


def test_the_proxys_log_lines_name_the_format_with_the_right_article(
    provider: tuple[Provider, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="middleware")
    with running(provider, tmp_path, **LOOPING) as stack:
        for path, headers, body in [
            ("/v1/messages", ANTHROPIC, {"model": "m", "max_tokens": 9, "messages": UNANSWERED}),
            ("/v1/messages", ANTHROPIC, {"model": "m", "max_tokens": 9, "messages": THREE_CALLS}),
            ("/v1/chat/completions", OPENAI, {"model": "m", "messages": [{"role": 5}]}),
        ]:
            httpx.post(stack.url + path, json=body, headers=headers, timeout=60)
    lines = logged(caplog)
    assert any("pairing repaired this anthropic history" in line for line in lines), lines
    assert any("could not process this anthropic request" in line for line in lines), lines
    assert any("leaving this openai body as it was" in line for line in lines), lines
    assert [line for line in lines if WRONG.search(line)] == []


def test_a_wrapped_clients_log_line_names_the_format_with_the_right_article(
    provider: tuple[Provider, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    anthropic = pytest.importorskip("anthropic")
    _, url = provider
    caplog.set_level(logging.INFO, logger="middleware")
    policy = middleware.load_policy(
        None, env={}, dotenv_path=False, overrides={**LOOPING, "spill.root": str(tmp_path)}
    )
    with anthropic.Anthropic(base_url=url, api_key="sk-test", max_retries=0) as plain:
        client = middleware.wrap(plain, policy=policy)
        client.messages.create(model="m", max_tokens=9, messages=THREE_CALLS)
    lines = logged(caplog)
    assert any("sent this anthropic request unchanged" in line for line in lines), lines
    assert [line for line in lines if WRONG.search(line)] == []


def test_a_pairing_reason_naming_a_wire_type_takes_its_article(tmp_path: Path) -> None:
    history = [
        {"type": "message", "role": "user", "content": "Patch it."},
        {"type": "function_call", "call_id": "call_1", "name": "patch", "arguments": "{}"},
        {"type": "apply_patch_call_output", "call_id": "call_1", "status": "completed"},
    ]
    policy = middleware.load_policy(
        None, env={}, dotenv_path=False, overrides={"spill.root": str(tmp_path)}
    )
    with middleware.Pipeline.from_policy(policy, session_id="articles") as pipe:
        actions = pipe.process(history, format="responses").report.actions
    (reason,) = [a.detail["reason"] for a in actions if a.kind == "orphan_dropped"]
    assert "apply_patch_call_output does not answer the function_call" in reason
    assert not WRONG.search(reason), reason
