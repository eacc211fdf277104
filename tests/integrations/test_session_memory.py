"""The SDK and LiteLLM integrations hold their sessions' state under the same budget as the
proxy (``proxy.session_memory_bytes``): many conversations in one process do not grow it
without bound, and a conversation whose state was forgotten is cleaned to the same bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware.integrations.sdk import Cleaner

BUDGET = 300_000


def policy(tmp_path: Path) -> middleware.Policy:
    overrides = {"proxy": {"session_memory_bytes": BUDGET}, "spill": {"root": str(tmp_path)}}
    return middleware.load_policy(None, env={}, dotenv_path=False, overrides=overrides)


def history(n: int, turns: int = 6) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"conversation {n}"}]
    for turn in range(turns):
        call = {"type": "tool_use", "id": f"t{n}_{turn}", "name": "Bash", "input": {"i": turn}}
        output = "".join(f"{n}.{turn} line {i}: src/m{i}.py ok\n" for i in range(400))
        messages += [
            {"role": "assistant", "content": [call]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": output}],
            },
        ]
    return messages


def test_the_sdk_cleaner_holds_its_sessions_under_the_budget(tmp_path: Path) -> None:
    cleaner = Cleaner(policy(tmp_path))
    headers = {"anthropic-version": "2023-06-01"}
    sent = {}
    for n in range(12):
        body = {"model": "m", "max_tokens": 10, "messages": history(n)}
        raw = json.dumps(body).encode()
        sent[n], _, _ = cleaner.prepare(
            "POST", "/v1/messages", {**headers, "x-chatcli-session": f"s{n}"}, raw
        )
        assert cleaner.pool.held_bytes <= BUDGET
    assert cleaner.pool.evictions > 0
    # The first conversation's state was forgotten: the same request gives the same bytes.
    again, _, _ = cleaner.prepare(
        "POST",
        "/v1/messages",
        {**headers, "x-chatcli-session": "s0"},
        json.dumps({"model": "m", "max_tokens": 10, "messages": history(0)}).encode(),
    )
    assert again == sent[0]


def test_the_litellm_callback_holds_its_sessions_under_the_budget(tmp_path: Path) -> None:
    pytest.importorskip("litellm", reason="needs the [litellm] extra")
    from middleware.integrations.litellm import ChatcliCallback

    callback = ChatcliCallback(policy(tmp_path))
    for n in range(12):
        messages = [{"role": "user", "content": f"conversation {n}"}]
        for turn in range(6):
            call_id = f"c{n}_{turn}"
            output = "".join(f"{n}.{turn} line {i}: src/m{i}.py ok\n" for i in range(400))
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function",
                     "function": {"name": "bash", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": call_id, "content": output},
            ]  # fmt: skip
        callback.clean({"model": "m", "messages": messages, "litellm_session_id": f"s{n}"})
        assert callback.pool.held_bytes <= BUDGET
    assert callback.pool.evictions > 0
    callback.close()
