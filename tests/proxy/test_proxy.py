"""The proxy over loopback, with plain HTTP: what it cleans, what it forwards untouched,
how it fails, and its own routes."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from proxy_stack import Stack, running
from session_builders import with_cache_marker
from stand_in import Provider
from waiting import wait_for

import middleware
from middleware.conversations import engine
from middleware.spill.layout import session_folder_name
from middleware.spill.local import LocalRoot
from middleware.spill.retention import collect, forget

ANTHROPIC = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
OPENAI = {"authorization": "Bearer sk-test"}
#: The address a test client beyond loopback names the proxy by (Starlette's test client
#: says it comes from "testclient", not loopback).
BEYOND = "http://192.0.2.10"

BROKEN_ANTHROPIC = {
    "model": "claude-test",
    "max_tokens": 100,
    "system": [
        {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}
    ],
    "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
    "metadata": {"user_id": "user_abc_account_def_session_1f0e6a2c-5b3d-4e8f-9a7b-0c1d2e3f4a5b"},
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "an_unknown_field": {"kept": True},
    "messages": [
        {"role": "user", "content": "List the files."},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
            ],
        },
        {"role": "user", "content": "Go on."},
    ],
}
BROKEN_CHAT = {
    "model": "gpt-test",
    "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "List the files."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "user", "content": "Go on."},
    ],
}
BROKEN_RESPONSES = {
    "model": "gpt-test",
    "instructions": "You are a coding agent.",
    "input": [
        {"type": "message", "role": "user", "content": "List the files."},
        {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"},
        {"type": "message", "role": "user", "content": "Go on."},
    ],
}


@pytest.mark.parametrize(
    ("path", "body", "headers"),
    [
        ("/v1/messages", BROKEN_ANTHROPIC, ANTHROPIC),
        ("/v1/messages/count_tokens", BROKEN_ANTHROPIC, ANTHROPIC),
        ("/v1/chat/completions", BROKEN_CHAT, OPENAI),
        ("/v1/responses", BROKEN_RESPONSES, OPENAI),
    ],
)
def test_a_broken_history_is_refused_directly_and_accepted_through_the_proxy(
    stack: Stack, path: str, body: dict[str, Any], headers: dict[str, str]
) -> None:
    direct = httpx.post(stack.upstream + path, json=body, headers=headers)
    assert direct.status_code == 400
    through = httpx.post(stack.url + path, json=body, headers=headers)
    assert through.status_code == 200, through.text
    _, seen_headers, sent = stack.provider.accepted[-1]
    assert {k: v for k, v in sent.items() if k not in ("messages", "input")} == {
        k: v for k, v in body.items() if k not in ("messages", "input")
    }  # system, tools, metadata, thinking, unknown fields: all as they were
    assert all(seen_headers[name] == value for name, value in headers.items())


def test_a_body_the_pipeline_leaves_alone_is_forwarded_byte_for_byte(stack: Stack) -> None:
    raw = b'{"model":"m","max_tokens":5,  "messages":[{"role":"user","content":"hi \\u00e9"}]}'
    declared = {**ANTHROPIC, "content-type": "application/json"}
    assert httpx.post(stack.url + "/v1/messages", content=raw, headers=declared).status_code == 200
    assert stack.provider.accepted[-1][2] == json.loads(raw)
    # and the stand-in saw the same bytes: its parse of them equals ours of the original


def test_other_paths_and_headers_pass_through(stack: Stack) -> None:
    headers = {
        **OPENAI,
        "openai-organization": "org-1",
        "x-custom": "yes",
        "connection": "x-hop",
        "x-hop": "not for the next hop",
        "te": "trailers",
    }
    answer = httpx.get(stack.url + "/v1/models?limit=3", headers=headers)
    assert answer.status_code == 200 and answer.json()["data"][0]["id"] == "stand-in"
    assert answer.headers["request-id"] == "req_stand_in"  # the upstream's headers come back
    saw = answer.headers["x-stand-in-saw"].split(",")
    assert {"authorization", "openai-organization", "x-custom"} <= set(saw)
    assert not {"x-hop", "te"} & set(saw)  # (the new hop sets its own connection)
    missing = httpx.post(stack.url + "/v1/moderations", json={"input": "x"}, headers=OPENAI)
    assert missing.status_code == 404  # the upstream's answer, whatever it is


def test_a_stream_is_relayed_chunk_by_chunk(stack: Stack) -> None:
    with httpx.stream("GET", stack.url + "/v1/slow-stream", timeout=30) as answer:
        chunks = answer.iter_raw()
        assert next(chunks) == b"data: first\n\n"  # before the upstream sent the rest
        stack.provider.release.set()
        assert b"".join(chunks) == b"data: second\n\n"


def test_a_client_that_goes_away_cancels_the_upstream_request(stack: Stack) -> None:
    with httpx.stream("GET", stack.url + "/v1/slow-stream", timeout=30) as answer:
        assert next(answer.iter_raw()) == b"data: first\n\n"
    assert stack.provider.cancelled.wait(timeout=30)


def test_not_json_and_not_a_conversation_go_through_untouched(stack: Stack) -> None:
    declared = {**ANTHROPIC, "content-type": "application/json"}  # said JSON, is not
    garbage = httpx.post(stack.url + "/v1/messages", content=b"{not json", headers=declared)
    assert garbage.status_code == 400  # the stand-in's own answer
    legacy = {"model": "m", "prompt": "completions of old"}
    httpx.post(stack.url + "/v1/chat/completions", json=legacy, headers=OPENAI)
    text = httpx.get(stack.url + "/metrics").text
    assert 'chatcli_proxy_passthrough_total{reason="not JSON"} 1.0' in text
    assert 'chatcli_proxy_passthrough_total{reason="not a conversation"} 1.0' in text


def test_an_oversized_body_gets_413_in_the_providers_shape(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    with running(provider, tmp_path, **{"proxy.max_body_bytes": 2048}) as stack:
        body = {**BROKEN_ANTHROPIC, "pad": "x" * 4000}
        answer = httpx.post(stack.url + "/v1/messages", json=body, headers=ANTHROPIC)
        assert answer.status_code == 413
        assert answer.json()["error"]["type"] == "request_too_large"
        chat = httpx.post(stack.url + "/v1/chat/completions", json=body, headers=OPENAI)
        assert chat.status_code == 413 and chat.json()["error"]["code"] == "request_too_large"
        assert not stack.provider.accepted


@pytest.fixture
def broken_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    def bug(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in a step")

    monkeypatch.setattr(engine, "process", bug)


@pytest.mark.usefixtures("broken_pipeline")
def test_fail_open_forwards_the_original_and_counts_it(stack: Stack) -> None:
    answer = httpx.post(stack.url + "/v1/chat/completions", json=BROKEN_CHAT, headers=OPENAI)
    assert answer.status_code == 400  # the provider's verdict on the original body
    assert (
        'chatcli_proxy_failures_total{error="RuntimeError"} 1.0'
        in httpx.get(stack.url + "/metrics").text
    )


@pytest.mark.usefixtures("broken_pipeline")
def test_fail_closed_answers_502_in_the_providers_shape(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    with running(provider, tmp_path, **{"proxy.fail_open": False}) as stack:
        answer = httpx.post(stack.url + "/v1/messages", json=BROKEN_ANTHROPIC, headers=ANTHROPIC)
        assert answer.status_code == 502
        assert "a bug in a step" in answer.json()["error"]["message"]
        assert not stack.provider.accepted and not stack.provider.refused


def session_of_last_request(stack: Stack) -> set[str]:
    return {key[1] for key in stack.proxy.conversations.pool._entries}


def test_sessions_come_from_headers_metadata_or_the_opening(stack: Stack) -> None:
    post = lambda body, **h: httpx.post(  # noqa: E731
        stack.url + "/v1/messages",
        json=body,
        headers={**ANTHROPIC, **h},
    )
    answer = post(BROKEN_ANTHROPIC)
    assert session_of_last_request(stack) == {"1f0e6a2c-5b3d-4e8f-9a7b-0c1d2e3f4a5b"}
    # The answer says which session the request was filed under (to end it with DELETE).
    assert answer.headers["x-chatcli-session"] == "1f0e6a2c-5b3d-4e8f-9a7b-0c1d2e3f4a5b"
    odd = post(BROKEN_ANTHROPIC, **{"x-chatcli-session": "team/alice 1"})
    assert odd.headers["x-chatcli-session"] == "team%2Falice%201"
    plain = {k: v for k, v in BROKEN_ANTHROPIC.items() if k != "metadata"}
    post(plain, **{"x-claude-code-session-id": "cc-session-7"})
    post(plain, **{"x-chatcli-session": "mine"})
    post(plain)
    longer = {**plain, "messages": [*plain["messages"], {"role": "assistant", "content": "ok"},
                                    {"role": "user", "content": "more"}]}  # fmt: skip
    post(longer)  # the same opening: the same conversation
    sessions = session_of_last_request(stack)
    assert {"cc-session-7", "mine"} <= sessions
    digests = {s for s in sessions if s.startswith("conv-")}
    assert len(digests) == 1


def test_a_chat_and_a_responses_conversation_that_open_alike_are_two_sessions(
    stack: Stack,
) -> None:
    """BROKEN_CHAT and BROKEN_RESPONSES say the same system prompt and first user message
    and call ``call_1`` first (issue 38, item 4: they were filed as one session): the
    format is part of the digest."""
    chat = httpx.post(stack.url + "/v1/chat/completions", json=BROKEN_CHAT, headers=OPENAI)
    responses = httpx.post(stack.url + "/v1/responses", json=BROKEN_RESPONSES, headers=OPENAI)
    filed = {chat.headers["x-chatcli-session"], responses.headers["x-chatcli-session"]}
    assert len(filed) == 2 and all(s.startswith("conv-") for s in filed)
    again = httpx.post(stack.url + "/v1/chat/completions", json=BROKEN_CHAT, headers=OPENAI)
    assert again.headers["x-chatcli-session"] == chat.headers["x-chatcli-session"]


def test_a_session_that_spilled_nothing_gets_no_spill_folder(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    """Issue 38, item 4: a session's folder is made by its first write (a spill, a kept
    reading, a recorded move), not by the proxy keeping the time of its last request
    when the session ends or the proxy stops. ``DELETE``, recall, the store's listing and
    ``gc`` take a session without one."""
    output = "a line of a long test run\n" * 5_000
    big = {**BROKEN_CHAT, "messages": [*BROKEN_CHAT["messages"][:3],
           {"role": "tool", "tool_call_id": "call_1", "content": output}]}  # fmt: skip
    with running(provider, tmp_path) as stack:
        post = lambda body, session: httpx.post(  # noqa: E731
            stack.url + "/v1/chat/completions",
            json=body,
            headers={**OPENAI, "x-chatcli-session": session},
        )
        assert post(BROKEN_CHAT, "small").status_code == 200  # repaired, nothing spilled
        assert post(big, "big").status_code == 200
        assert "tool-results" in stack.provider.accepted[-1][2]["messages"][3]["content"]
        assert post(BROKEN_CHAT, "open").status_code == 200  # open until the proxy stops
        ended = httpx.delete(stack.url + "/sessions/small")
        assert ended.json() == {"session": "small", "released": 1, "removed": False}
    spill = tmp_path / "spill"
    assert [p.name for p in spill.iterdir()] == [session_folder_name("big")]
    root = LocalRoot(spill)
    assert [f.name for f in root.sessions()] == [session_folder_name("big")]
    assert root.read(session_folder_name("open"), "call_1-0123456789abcdef.txt") is None
    gone = collect(root, 0, now=time.time() + 1, dry_run=True).removed
    assert [f.name for f in gone] == [session_folder_name("big")]
    assert forget(root, "open") is False and forget(root, "big") is True
    assert not list(spill.iterdir())


def test_a_path_prefix_selects_a_preset_and_never_a_path(stack: Stack) -> None:
    output = "line\n" * 5000
    body = {**BROKEN_CHAT, "messages": [*BROKEN_CHAT["messages"][:3],
            {"role": "tool", "tool_call_id": "call_1", "content": output}]}  # fmt: skip
    pi = httpx.post(stack.url + "/policy/preset:pi/v1/chat/completions", json=body, headers=OPENAI)
    assert pi.status_code == 200
    sent = stack.provider.accepted[-1][2]["messages"][3]["content"]
    assert "[Showing lines" in sent or "Full output:" in sent  # pi's own notice
    for name in ("nope", "..%2F..%2Fetc%2Fpasswd", "preset:nope"):
        wrong = httpx.post(
            f"{stack.url}/policy/{name}/v1/chat/completions", json=body, headers=OPENAI
        )
        assert wrong.status_code == 404 and "choose one of" in wrong.json()["error"]["message"]
    # A preset is shipped, never edited: serving one watches nothing.
    served = [stack.proxy.catalog.default, *stack.proxy.catalog._named.values()]
    assert all(s._watcher is None or not s._watcher._thread.is_alive() for s in served)


def test_a_policy_folder_serves_its_files_by_name(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "tight.yaml").write_text("version: 1\nbudget:\n  max_result_chars: 1000\n", "utf-8")
    body = {**BROKEN_CHAT, "messages": [*BROKEN_CHAT["messages"][:3],
            {"role": "tool", "tool_call_id": "call_1", "content": "y" * 5000}]}  # fmt: skip
    with running(provider, tmp_path, **{"proxy.policies_dir": str(folder)}) as stack:
        httpx.post(stack.url + "/policy/tight/v1/chat/completions", json=body, headers=OPENAI)
        assert "full output saved to" in stack.provider.accepted[-1][2]["messages"][3]["content"]
        httpx.post(stack.url + "/v1/chat/completions", json=body, headers=OPENAI)
        assert stack.provider.accepted[-1][2]["messages"][3]["content"] == "y" * 5000


def test_the_policy_is_hot_reloaded_and_a_bad_edit_shows_on_healthz(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\nbudget:\n  max_result_chars: 20000\n", "utf-8")
    body = {**BROKEN_CHAT, "messages": [*BROKEN_CHAT["messages"][:3],
            {"role": "tool", "tool_call_id": "call_1", "content": "z" * 5000}]}  # fmt: skip
    with running(provider, tmp_path, str(policy)) as stack:
        url = stack.url

        def health() -> Any:
            return httpx.get(url + "/healthz").json()

        assert health()["status"] == "ok"
        policy.write_text("version: 1\nbudget:\n  max_result_chars: 1000\n", "utf-8")
        assert wait_for(lambda: health()["policies"]["default"]["generation"] == 2)
        httpx.post(stack.url + "/v1/chat/completions", json=body, headers=OPENAI)
        assert "full output saved to" in stack.provider.accepted[-1][2]["messages"][3]["content"]
        policy.write_text("version: 1\nbudget:\n  max_result_chars: -5\n", "utf-8")
        assert wait_for(lambda: health()["status"] == "degraded")
        assert "max_result_chars" in health()["policies"]["default"]["last_error"]
        httpx.post(stack.url + "/v1/chat/completions", json=body, headers=OPENAI)
        assert (
            "full output saved to" in stack.provider.accepted[-1][2]["messages"][3]["content"]
        )  # kept
        metrics = httpx.get(stack.url + "/metrics").text
        rejected = 'chatcli_proxy_policy_reloads_total{outcome="rejected",policy="default"} '
        line = next(row for row in metrics.splitlines() if row.startswith(rejected))
        assert float(line.split()[-1]) >= 1  # each reload of the bad file is one rejection


def test_recall_serves_a_spilled_file_to_this_machine(stack: Stack) -> None:
    output = "".join(f"line {i}\n" for i in range(5000))
    body = {**BROKEN_CHAT, "messages": [*BROKEN_CHAT["messages"][:3],
            {"role": "tool", "tool_call_id": "call_1", "content": output}]}  # fmt: skip
    httpx.post(
        stack.url + "/v1/chat/completions",
        json=body,
        headers={**OPENAI, "x-chatcli-session": "recall-me"},
    )
    preview = stack.provider.accepted[-1][2]["messages"][3]["content"]
    path = Path(preview.split("full output saved to ")[1].split("]")[0])
    assert path.read_text(encoding="utf-8") == output  # the local path the agent reads
    recalled = httpx.get(f"{stack.url}/recall/recall-me/{path.name}")
    assert recalled.status_code == 200 and recalled.text == output
    assert httpx.get(f"{stack.url}/recall/recall-me/other-0000000000000000.txt").status_code == 404
    assert httpx.get(f"{stack.url}/recall/recall-me/..%2F..%2Fetc%2Fpasswd").status_code == 404


def test_recall_by_lines_and_the_end_of_a_session(stack: Stack) -> None:
    output = "".join(f"line {i}\n" for i in range(1, 5001))
    body = {**BROKEN_CHAT, "messages": [*BROKEN_CHAT["messages"][:3],
            {"role": "tool", "tool_call_id": "call_1", "content": output}]}  # fmt: skip
    answer = httpx.post(
        stack.url + "/v1/chat/completions",
        json=body,
        headers={**OPENAI, "x-chatcli-session": "team/ends 1"},
    )
    session = answer.headers["x-chatcli-session"]  # as a path segment: team%2Fends%201
    preview = stack.provider.accepted[-1][2]["messages"][3]["content"]
    path = Path(preview.split("full output saved to ")[1].split("]")[0])
    part = httpx.get(f"{stack.url}/recall/{session}/{path.name}?offset=4999&limit=5")
    assert part.text == "line 4999\nline 5000\n"
    assert part.headers["x-chatcli-lines"] == "4999-5000/5000"
    assert httpx.get(f"{stack.url}/recall/{session}/{path.name}?offset=5001").status_code == 416
    assert httpx.get(f"{stack.url}/recall/{session}/{path.name}?limit=many").status_code == 400
    assert len(stack.proxy.conversations.pool) == 1
    ended = httpx.delete(f"{stack.url}/sessions/{session}")
    assert ended.json() == {"session": "team/ends 1", "released": 1, "removed": True}
    assert not path.exists() and not path.parent.parent.exists()
    assert len(stack.proxy.conversations.pool) == 0
    assert httpx.get(f"{stack.url}/recall/{session}/{path.name}").status_code == 404
    again = httpx.delete(f"{stack.url}/sessions/{session}")
    assert again.json() == {"session": "team/ends 1", "released": 0, "removed": False}


def test_recall_and_session_end_refuse_other_machines_without_the_token(stack: Stack) -> None:
    from starlette.testclient import TestClient  # its client address is not loopback

    from middleware.proxy.app import create_app

    with TestClient(create_app(stack.proxy), base_url=BEYOND) as client:
        assert client.get("/recall/s/x-0000000000000000.txt").status_code == 403
        assert client.delete("/sessions/s").status_code == 403
        assert client.get("/sessions/s").status_code == 403
        assert client.get("/sessions").status_code == 403


def test_a_conversation_that_goes_on_is_counted_as_continued(stack: Stack) -> None:
    """Each request repeats the conversation and adds a turn, its cache marker moved to the
    last message, as Claude Code sends them: from the third on, each continues."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
    for i in range(4):
        body = {**BROKEN_ANTHROPIC, "messages": with_cache_marker(messages)}
        sent = httpx.post(stack.url + "/v1/messages", json=body, headers=ANTHROPIC)
        assert sent.status_code == 200, sent.text
        call = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": "ls"}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"file{i}.py"}
        messages = [
            *messages,
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ]
    # The second request shares no turn with the first, whose only message had the marker.
    assert "chatcli_proxy_continued_total 2.0" in httpx.get(stack.url + "/metrics").text


def test_metrics_and_access_log(stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    big = {**BROKEN_CHAT, "messages": [*BROKEN_CHAT["messages"][:3],
           {"role": "tool", "tool_call_id": "call_1", "content": "q" * 50_000}]}  # fmt: skip
    with caplog.at_level(logging.INFO, logger="middleware.proxy.access"):
        httpx.post(
            stack.url + "/v1/chat/completions",
            json=BROKEN_CHAT,
            headers={**OPENAI, "x-chatcli-session": "s1"},
        )
        httpx.post(
            stack.url + "/v1/chat/completions",
            json=big,
            headers={**OPENAI, "x-chatcli-session": "s1"},
        )
        assert wait_for(lambda: len(caplog.records) >= 2)
    first, second = (json.loads(r.getMessage()) for r in caplog.records[:2])
    assert first["session"] == "s1" and first["status"] == 200 and first["repairs"] == 1
    assert second["actions"] == {"spilled": 1} and second["chars_before"] == 50_000
    assert second["chars_after"] < 10_000 and second["route"] == "/v1/chat/completions"
    text = httpx.get(stack.url + "/metrics").text
    for line in (
        'chatcli_proxy_requests_total{route="/v1/chat/completions",status="200"} 2.0',
        'chatcli_proxy_actions_total{kind="synthetic_result",step="pairing"} 1.0',
        'chatcli_proxy_actions_total{kind="spilled",step="budget"} 1.0',
        "chatcli_proxy_process_seconds_count 2.0",
        'chatcli_proxy_upstream_seconds_count{upstream="openai"} 2.0',
    ):
        assert line in text, line
    removed = next(
        row for row in text.splitlines() if row.startswith("chatcli_proxy_chars_removed_total")
    )
    assert float(removed.split()[1]) > 40_000


def test_a_responses_continuation_keeps_outputs_of_stored_calls(stack: Stack) -> None:
    output = {"type": "function_call_output", "call_id": "call_in_store", "output": "done"}
    body = {"model": "m", "previous_response_id": "resp_1", "input": [output]}
    httpx.post(stack.url + "/v1/responses", json=body, headers=OPENAI)
    # The stand-in refuses it (it holds no stored response), but the proxy sent it as it was:
    # the output answers a call of the stored response, not an orphan to drop.
    _, message, sent = stack.provider.refused[-1]
    assert message.startswith("No tool call found for") and sent == body


def test_a_request_naming_no_provider_goes_where_the_policy_says(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    unreachable = "http://127.0.0.1:9"  # discard port: nothing listens
    for other, status in (("anthropic", 200), ("openai", 502)):
        upstreams = {"anthropic": provider[1], "openai": unreachable}
        with running(
            provider, tmp_path, **{"proxy.upstreams": upstreams, "proxy.other_requests": other}
        ) as stack:
            assert httpx.get(stack.url + "/v1/models").status_code == status
            # Claude Code's connectivity probe: no API path, answered here (issue 43, item 4)
            assert httpx.head(stack.url + "/").status_code == 404
            claude = httpx.get(stack.url + "/v1/nowhere", headers={"user-agent": "claude-cli/2"})
            assert claude.status_code == 404  # Claude Code is Anthropic's, whatever the policy


def test_codex_code_mode_items_pass_through_and_their_outputs_are_budgeted(stack: Stack) -> None:
    """Codex CLI 0.171 with its newer models declares tools in an ``additional_tools``
    input item and calls them from JavaScript (``custom_tool_call``): the item goes through
    as it was, and the call's output is budgeted like any other."""
    tools = {"type": "additional_tools", "id": "at_01", "role": "developer", "tools": [
        {"type": "namespace", "name": "functions", "description": "", "tools": [
            {"type": "custom", "name": "exec", "description": "Run JavaScript"}]}]}  # fmt: skip
    output = "".join(f"line {i}\n" for i in range(2000))
    body = {"model": "gpt-6.2-sol", "stream": False, "input": [
        tools,
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "exec",
         "input": "const r = await tools.exec_command({cmd: 'seq 2000'}); text(r);"},
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": output},
    ]}  # fmt: skip
    answer = httpx.post(stack.url + "/v1/responses", json=body, headers=OPENAI)
    assert answer.status_code == 200
    sent = stack.provider.accepted[-1][2]["input"]
    assert sent[0] == tools and sent[2] == body["input"][2]
    assert "full output saved to" in sent[3]["output"] and len(sent[3]["output"]) < 6000


def test_an_api_key_in_a_query_string_is_never_logged(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    """Gemini clients put their key in the query (issue 26, item 8): the access log names
    the path only, and the HTTP client's per-request INFO line (the URL, query included)
    is not written."""
    from proxy_stack import serve_process

    _, upstream = provider
    log = tmp_path / "serve.log"
    with serve_process(upstream, {"spill.root": str(tmp_path)}, log=log) as url:
        secret = "AIzaSyD-secret-key-0123456789"
        for path in ("/v1beta/models/gemini-x:generateContent", "/v1/messages"):
            httpx.post(
                f"{url}{path}?key={secret}", json=BROKEN_ANTHROPIC, headers=ANTHROPIC, timeout=30
            )
        httpx.get(f"{url}/v1/models?key={secret}", timeout=30)
    written = log.read_text("utf-8")
    assert "/v1/messages" in written  # the access log has its lines
    assert secret not in written


def test_header_values_of_any_bytes_pass_both_ways_as_they_came(stack: Stack) -> None:
    """``X-Title: café`` in UTF-8 once got a plain-text 500, and a UTF-8 answer header a
    500 the access log counted as 200 (issue 26, item 5): headers are relayed as bytes."""
    title = "café ✓".encode()
    for path in ("/v1/echo-headers", "/v1/messages"):
        answer = httpx.post(
            stack.url + path, json=BROKEN_ANTHROPIC, headers={**ANTHROPIC, "x-title": title}
        )
        assert answer.status_code == 200, answer.text
    echoed = httpx.post(stack.url + "/v1/echo-headers", json={}, headers={"x-title": title})
    assert echoed.json()["x-title"].encode("latin-1") == title  # the bytes, unchanged
    assert (
        echoed.headers.raw[[k for k, _ in echoed.headers.raw].index(b"x-stand-in-title")][1]
        == "café ✓".encode()
    )
    assert stack.provider.accepted[-1][1]["x-title"].encode("latin-1") == title
    deadline = time.monotonic() + 5  # a relayed answer is counted once it has gone out
    while True:
        requests = stack.proxy.metrics.registry.get_sample_value(
            "chatcli_proxy_requests_total", {"route": "other", "status": "200"}
        )
        if requests == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert requests == 2


def test_an_invalid_policy_of_the_folder_is_parsed_once_and_off_the_event_loop(
    provider: tuple[Provider, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An invalid file in --policies-dir was parsed again on every request for it, on the
    event loop (0.6 s per request for 1 MiB; /healthz waited 7-25 s) (issue 26, item 4)."""
    import threading

    from middleware.proxy import policies

    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "bad.yaml").write_text("version: 1\nbudget:\n  max_result_char: 5\n", "utf-8")
    (folder / "secret-team.yaml").write_text("version: 1\n", "utf-8")
    parses: list[str] = []
    release = threading.Event()
    real = policies.PolicySource

    class Slow(real):  # type: ignore[misc,valid-type]
        def __init__(self, key: str, *args: Any) -> None:
            parses.append(key)
            release.wait(10)  # a 1 MiB file takes this long to read
            super().__init__(key, *args)

    monkeypatch.setattr(policies, "PolicySource", Slow)
    with running(provider, tmp_path, **{"proxy.policies_dir": str(folder)}) as stack:
        url = f"{stack.url}/policy/bad/v1/chat/completions"
        first = threading.Thread(
            target=httpx.post,
            args=(url,),
            kwargs={"json": BROKEN_CHAT, "headers": OPENAI, "timeout": 30},
        )
        first.start()
        while not parses:
            time.sleep(0.01)
        # While the file is read, the proxy answers everything else.
        assert httpx.get(stack.url + "/healthz", timeout=5).status_code == 200
        release.set()
        first.join()
        answers = [httpx.post(url, json=BROKEN_CHAT, headers=OPENAI, timeout=30) for _ in range(20)]
        assert {a.status_code for a in answers} == {404}
        assert "max_result_char" in answers[0].json()["error"]["message"]
        assert parses == ["bad"]  # once, not once per request
        # Fixed, it is read again and served; the 404 never lists the folder's files.
        time.sleep(0.01)
        (folder / "bad.yaml").write_text("version: 1\nbudget:\n  max_result_chars: 900\n")
        assert httpx.post(url, json=BROKEN_CHAT, headers=OPENAI, timeout=30).status_code == 200
        missing = httpx.post(
            f"{stack.url}/policy/nope/v1/chat/completions", json=BROKEN_CHAT, headers=OPENAI
        )
        assert "secret-team" not in missing.text and "preset:pi" in missing.text


def test_a_base_url_with_a_trailing_slash_is_still_cleaned(stack: Stack) -> None:
    """``ANTHROPIC_BASE_URL=http://host:8787/`` makes SDKs send ``//v1/messages``; that
    request once went through uncleaned (issue 26, item 10)."""
    answer = httpx.post(stack.url + "//v1/messages", json=BROKEN_ANTHROPIC, headers=ANTHROPIC)
    assert answer.status_code == 200
    assert stack.provider.accepted[-1][0] == "/v1/messages"
    assert stack.provider.accepted[-1][2]["messages"][2]["content"][0]["type"] == "tool_result"


def test_status_routes_can_require_a_token_beyond_loopback(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    from starlette.testclient import TestClient  # its client address is not loopback

    from middleware.proxy.app import create_app

    token = "status-token-0123456789"
    with running(provider, tmp_path, **{"proxy.status_token": token}) as stack:
        assert httpx.get(stack.url + "/healthz").status_code == 200  # loopback
        with TestClient(create_app(stack.proxy), base_url=BEYOND) as client:
            for path in ("/healthz", "/metrics"):
                refused = client.get(path)
                assert refused.status_code == 403 and "proxy.status_token" in refused.text
                allowed = client.get(path, headers={"authorization": f"Bearer {token}"})
                assert allowed.status_code == 200
    with (
        running(provider, tmp_path) as open_stack,
        TestClient(create_app(open_stack.proxy), base_url=BEYOND) as c,
    ):
        assert c.get("/metrics").status_code == 200  # no token set: open, as before


def test_serve_warns_when_it_listens_beyond_loopback(caplog: pytest.LogCaptureFixture) -> None:
    from middleware.cli.serve import _warn_if_exposed
    from middleware.policy.settings import bind
    from middleware.proxy.settings import ProxySettings

    def settings(**overrides: Any) -> ProxySettings:
        return bind(
            middleware.load_policy(None, overrides=overrides, dotenv_path=False), ProxySettings
        )

    with caplog.at_level(logging.WARNING):
        _warn_if_exposed(settings())
        assert not caplog.records
        _warn_if_exposed(settings(**{"proxy.host": "0.0.0.0"}))
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "proxy.status_token" in said and "proxy.recall_token" in said
