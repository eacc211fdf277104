"""The ledger through the proxy: an agent's session sent with the official SDKs to a
stand-in that caches prompt prefixes with expiry as the providers do; what the ledger says
was billed is, to the token, the sum of the usage the stand-in reported, and its estimate
of the unprocessed session is set beside what the same session costs sent directly."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from billing_builders import Clock, output, reported
from prompt_cache import PromptCache
from proxy_stack import Stack, running
from servers import closed_at_the_end, serving
from stand_in import Provider
from waiting import wait_for

from middleware.ledger import Usage
from middleware.ledger.prices import ModelPrices

MODEL = "claude-sonnet-5"
SONNET = ModelPrices(2.0, 10.0, 0.2, 2.5, 4.0)
SESSION = "ledger-session"


def agent_turns(turns: int) -> Iterator[list[dict[str, Any]]]:
    """The histories of an agent's requests, as Claude Code sends them: the last block
    of the last message marked for the cache."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Find the slow handler."}]
    for turn in range(turns):
        marked = json.loads(json.dumps(history))
        last = marked[-1]
        if isinstance(last["content"], str):
            last["content"] = [{"type": "text", "text": last["content"]}]
        last["content"][-1]["cache_control"] = {"type": "ephemeral"}
        yield marked
        call = {
            "type": "tool_use",
            "id": f"toolu_{turn:02d}",
            "name": "Bash",
            "input": {"command": f"grep -rn handler src/part{turn}"},
        }
        history.append({"role": "assistant", "content": [call]})
        history.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call["id"], "content": output(turn)}
                ],
            }
        )


SYSTEM = [{"type": "text", "text": "You are a coding agent. " * 400,
           "cache_control": {"type": "ephemeral"}}]  # fmt: skip


def test_the_ledger_bills_what_the_provider_reported_and_estimates_the_rest(
    caching: tuple[Provider, str, Clock], tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    provider, upstream, clock = caching
    control_clock = Clock()
    control = Provider(cache=PromptCache(control_clock), context_chars=10**8, record=False)
    with (
        running((provider, upstream), tmp_path) as stack,
        serving(control.app()) as direct,
        caplog.at_level(logging.INFO, logger="middleware.proxy.access"),
    ):
        stack.proxy.ledger.clock = clock  # the pause below passes for the ledger too
        client = closed_at_the_end(
            anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0)
        )
        headers = {"x-chatcli-session": SESSION}
        for turn, messages in enumerate(agent_turns(12)):
            if turn == 7:  # a pause past the cache's lifetime: everything is written again
                clock.now += 400
                control_clock.now += 400
            body = {"model": MODEL, "max_tokens": 64, "system": SYSTEM, "messages": messages}
            if turn % 2:
                with client.messages.stream(**body, extra_headers=headers) as stream:
                    stream.get_final_message()
            else:
                client.messages.create(**body, extra_headers=headers)
            sent = httpx.post(
                direct + "/v1/messages",
                json=body,
                headers={"anthropic-version": "2023-06-01", "x-api-key": "k"},
            )
            assert sent.status_code == 200
        assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 12)
        ledger = httpx.get(f"{stack.url}/sessions/{SESSION}").json()
        metrics = httpx.get(stack.url + "/metrics").text
        total = httpx.get(stack.url + "/sessions").json()

    billed = reported(provider.cache, "anthropic")  # type: ignore[arg-type]
    assert billed.cache_read and billed.cache_write_5m  # caching was at play
    assert {k: ledger["billed"][k] for k in billed.as_dict()} == billed.as_dict()
    assert ledger["requests"] == 12 and ledger["unread"] == 0 and ledger["unpriced"] == 0
    assert ledger["models"] == {MODEL: 12}
    assert ledger["billed"]["dollars"] == pytest.approx(SONNET.dollars(billed), abs=1e-6)
    assert total["total"]["requests"] == 12 and total["total"]["billed"] == ledger["billed"]
    assert total["sessions"] == [ledger]
    for kind, tokens in billed.as_dict().items():
        if not tokens:
            continue
        line = f'chatcli_proxy_billed_tokens_total{{kind="{kind}",priced_as="*claude-sonnet-5*"}}'
        assert f"{line} {float(tokens)}" in metrics
    # The access log gives each request's bill; together, the session's.
    lines = [json.loads(r.getMessage()) for r in caplog.records]
    logged = [line for line in lines if line.get("session") == SESSION]
    assert sum(line["billed"]["cache_read"] for line in logged) == billed.cache_read

    # The estimate of the unprocessed session against that session really sent: the
    # proxy spilled most of every output, so it would have cost several times as much
    # (measured: estimated $0.906, sent $0.868; billed $0.097).
    raw = reported(control.cache, "anthropic")  # type: ignore[arg-type]
    estimated = Usage(**{k: ledger["without"][k] for k in billed.as_dict()})
    assert SONNET.dollars(raw) > 2 * SONNET.dollars(billed)
    assert ledger["without"]["dollars"] == pytest.approx(SONNET.dollars(raw), rel=0.08)
    assert estimated.prompt == pytest.approx(raw.prompt, rel=0.08)
    assert ledger["saved_dollars"] > 0
    # Calibration: the provider read what the cost model expected, within a few percent
    # (the pause's request expected nothing, the cache having expired for both).
    cache = ledger["cache"]
    assert cache["read"] > 0 and cache["shortfall"] <= 0.05 * cache["expected_read"]


@pytest.mark.parametrize("provider_ttl", ["none", "shorter"])
def test_a_provider_that_caches_less_than_expected_shows_as_a_shortfall(
    provider_ttl: str, tmp_path: Any
) -> None:
    clock = Clock()
    # A provider that caches nothing, or keeps its cache 5 minutes where the policy says
    # an hour: requests 10 minutes apart then read nothing.
    cache = PromptCache(clock, min_tokens=10**9 if provider_ttl == "none" else 1024)
    stand_in = Provider(cache=cache, context_chars=10**8)
    with (
        serving(stand_in.app()) as upstream,
        running((stand_in, upstream), tmp_path, **{"ledger.cache_lifetime_seconds": 3600}) as stack,
    ):
        stack.proxy.ledger.clock = clock
        client = closed_at_the_end(
            anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0)
        )
        for messages in agent_turns(4):
            clock.now += 600 if provider_ttl == "shorter" else 1
            client.messages.create(
                model=MODEL,
                max_tokens=5,
                system=SYSTEM,
                messages=messages,
                extra_headers={"x-chatcli-session": "s"},
            )
        assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 4)
        ledger = httpx.get(stack.url + "/sessions/s").json()
        metrics = httpx.get(stack.url + "/metrics").text
    assert ledger["billed"]["cache_read"] == 0
    expected = ledger["cache"]["expected_read"]
    assert expected > 5_000 and ledger["cache"]["shortfall"] == expected
    line = 'chatcli_proxy_cache_read_missed_tokens_total{priced_as="*claude-sonnet-5*"}'
    assert f"{line} {float(expected)}" in metrics


def test_openai_answers_are_billed_streamed_or_not(
    caching: tuple[Provider, str, Clock], tmp_path: Any
) -> None:
    provider, upstream, _ = caching
    with running((provider, upstream), tmp_path) as stack:
        client = closed_at_the_end(
            openai.OpenAI(base_url=stack.url + "/v1", api_key="k", max_retries=0)
        )
        headers = {"x-chatcli-session": "chat-session"}
        history: list[dict[str, Any]] = [
            {"role": "system", "content": "Be brief. " * 900},
            {"role": "user", "content": "List the handlers."},
        ]
        for turn in range(3):
            stream = client.chat.completions.create(
                model="gpt-4.1-2025-04-14",
                messages=history,  # type: ignore[arg-type]
                stream=True,
                stream_options={"include_usage": True},
                extra_headers=headers,
            )
            for _ in stream:
                pass
            call = {
                "id": f"call_{turn}",
                "type": "function",
                "function": {"name": "grep", "arguments": "{}"},
            }
            history += [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "content": output(turn)},
            ]
        responses = closed_at_the_end(
            openai.OpenAI(base_url=stack.url + "/v1", api_key="k", max_retries=0)
        )
        responses.responses.create(
            model="gpt-5-mini",
            input="Hello " * 2000,
            extra_headers={"x-chatcli-session": "responses-session"},
        )
        assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 4)
        chat = httpx.get(stack.url + "/sessions/chat-session").json()
        answered = httpx.get(stack.url + "/sessions/responses-session").json()
    billed = reported(provider.cache, "openai")  # type: ignore[arg-type]
    assert billed.cache_read > 0  # the second and third requests read the first's prefix
    assert {k: chat["billed"][k] for k in billed.as_dict()} == billed.as_dict()
    assert chat["billed"]["cache_write_5m"] == 0 and chat["unread"] == 0
    assert chat["without"]["input"] + chat["without"]["cache_read"] > billed.prompt
    again = reported(provider.cache, "responses")  # type: ignore[arg-type]
    assert {k: answered["billed"][k] for k in again.as_dict()} == again.as_dict()
    assert answered["billed"]["dollars"] == pytest.approx(
        ModelPrices(0.25, 2.0, 0.025, 0.25, 0.25).dollars(again), abs=1e-6
    )


def test_a_stream_without_usage_is_counted_as_unread(stack: Stack) -> None:
    client = closed_at_the_end(
        openai.OpenAI(base_url=stack.url + "/v1", api_key="k", max_retries=0)
    )
    for _ in client.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        extra_headers={"x-chatcli-session": "no-usage"},
    ):
        pass
    assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 1)
    ledger = httpx.get(stack.url + "/sessions/no-usage").json()
    assert ledger["unread"] == 1 and ledger["billed"]["input"] == 0
    assert "chatcli_proxy_usage_unread_total 1.0" in httpx.get(stack.url + "/metrics").text
    missing = httpx.get(stack.url + "/sessions/never-seen")
    assert missing.status_code == 404 and "never-seen" in missing.text


def test_a_token_count_is_not_billed(stack: Stack) -> None:
    client = closed_at_the_end(anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0))
    client.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    client.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 1)
    assert stack.proxy.ledger.total()["billed"]["input"] == 10  # the stand-in's fixed usage


def test_the_ledger_command_prints_a_running_proxys_sessions(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    from middleware.cli.app import main

    client = closed_at_the_end(anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0))
    for session in ("first", "second"):
        client.messages.create(
            model=MODEL,
            max_tokens=5,
            extra_headers={"x-chatcli-session": session},
            messages=[{"role": "user", "content": "hi"}],
        )
    assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 2)
    assert main(["ledger", "--url", stack.url]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split() == ["session", "requests", "billed", "est.", "without", "saved", "ratio"]
    assert [row.split()[0] for row in rows[1:4]] == ["second", "first", "total"]
    assert rows[3].split()[1:3] == ["2", "$0.0001"]  # 20 input at $2, 10 output at $10 a MTok
    assert main(["ledger", "first", "--url", stack.url]) == 0
    table = capsys.readouterr().out
    assert "session first: 1 requests (claude-sonnet-5)" in table
    assert "input" in table and "saved $0.0000 (billed 1.00 of the estimate" in table
    assert main(["ledger", "first", "--url", stack.url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["billed"]["input"] == 10
    assert main(["ledger", "nobody", "--url", stack.url]) == 2
    assert "404" in capsys.readouterr().err
    assert main(["ledger", "--url", "file:///etc/passwd"]) == 2


def test_with_a_ledger_file_the_ledger_outlives_a_restart(
    provider: tuple[Provider, str], tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from middleware.cli.app import main

    file = tmp_path / "ledger.jsonl"
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    headers = {"x-chatcli-session": "kept", "anthropic-version": "2023-06-01"}
    with running(provider, tmp_path, **{"ledger.file": str(file)}) as stack:
        httpx.post(stack.url + "/v1/messages", json=body, headers=headers)
        assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 1)
    with running(provider, tmp_path, **{"ledger.file": str(file)}) as stack:  # restarted
        assert httpx.get(stack.url + "/sessions/kept").json()["requests"] == 1
        httpx.post(stack.url + "/v1/messages", json=body, headers=headers)
        assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 2)
    # No proxy running: the command reads the file.
    assert main(["ledger", "kept", "--file", str(file), "--json"]) == 0
    kept = json.loads(capsys.readouterr().out)
    assert kept["requests"] == 2 and kept["billed"]["input"] == 20
    assert main(["ledger", "--file", str(file)]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["kept", "2"]
    assert main(["ledger", "--file", str(tmp_path / "missing.jsonl")]) == 2
    assert "no ledger file there" in capsys.readouterr().err


#: A schedule that never pays for a rewrite in a warm cache in this short session.
THRIFTY = {
    "microcompact.schedule.rewrite_cost": 10_000.0,
    "microcompact.schedule.min_reclaim_tokens": 500,
}


def _sent(case: str, tmp_path: Any) -> list[dict[str, Any]]:
    """What the provider received of a 10-turn session through the proxy: ``steady``
    (a caching provider, no pause), ``idle`` (the same, 10 minutes away before the
    8th request) or ``uncached`` (a provider that caches nothing)."""
    clock = Clock()
    cache = PromptCache(clock, min_tokens=10**9 if case == "uncached" else 1024)
    stand_in = Provider(cache=cache, context_chars=10**8)
    with (
        serving(stand_in.app()) as upstream,
        running((stand_in, upstream), tmp_path / case, **THRIFTY) as stack,
    ):
        stack.proxy.ledger.clock = clock
        client = closed_at_the_end(
            anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0)
        )
        for turn, messages in enumerate(agent_turns(10)):
            clock.now += 600 if case == "idle" and turn == 7 else 10
            client.messages.create(
                model=MODEL,
                max_tokens=5,
                system=SYSTEM,
                messages=messages,
                extra_headers={"x-chatcli-session": "s"},
            )
            # The next request goes once this answer is billed (an agent waits for it).
            assert wait_for(lambda turn=turn: stack.proxy.ledger.total()["requests"] == turn + 1)
    # Each run spills to a folder of its own: named alike, the bodies compare.
    root = json.dumps(str(tmp_path / case))[1:-1]
    return [json.loads(json.dumps(body).replace(root, "ROOT")) for _, _, body in stand_in.accepted]


def test_a_cold_cache_is_rewritten_for_free_and_kept_so(tmp_path: Any) -> None:
    """After an idle gap past the cache's lifetime, or once answers show the provider
    reads none of its cache, the proxy compacts what a warm cache would not pay to
    rewrite; and the requests after that keep the old turns as that one rewrote them."""
    steady, idle, uncached = (_sent(case, tmp_path) for case in ("steady", "idle", "uncached"))

    def first_change(bodies: list[dict[str, Any]]) -> int:
        return next(k for k, (a, b) in enumerate(zip(steady, bodies, strict=True)) if a != b)

    assert first_change(idle) == 7  # the request after the pause
    # The first request expects nothing, the next two read nothing of what they expected:
    # from the fourth on, the session is cold, and the 6th is the first with old results
    # to compact (past the trigger, older than the turns kept whole).
    assert first_change(uncached) == 5
    # After the pause, the cache warm again keeps what the cold request wrote.
    for before, after in itertools.pairwise(idle[7:]):
        old = before["messages"][:-1]
        assert after["messages"][: len(old)] == old
