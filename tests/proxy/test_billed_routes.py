"""Every billed call the proxy relays goes into the ledger (issue 43, item 8): a Responses
session that compacts every 5 requests through ``/v1/responses/compact``, as Codex CLI's
remote compaction and the OpenAI SDK's ``responses.compact`` do, billed to the token by
the stand-in's prompt cache; and the other billed OpenAI routes with a ``usage`` in their
answer (legacy completions, embeddings). What is relayed but not billed, and why, is in
docs/proxy.md (What it saved)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai
import pytest
from billing_builders import Clock, output, reported
from prompt_cache import PromptCache
from proxy_stack import Stack, running
from servers import closed_at_the_end, serving
from stand_in import Provider, tokens_of
from waiting import wait_for

from middleware.ledger import Usage
from middleware.ledger.prices import ModelPrices

MODEL = "gpt-5.5"
#: The ``*gpt-5*`` entry of ``ledger.prices``.
GPT_5 = ModelPrices(1.25, 10.0, 0.125, 1.25, 1.25)
SESSION = "compacting-session"
REQUESTS = 20
COMPACT_EVERY = 5


def call(turn: int) -> list[dict[str, Any]]:
    """One tool call of the agent's and its long output, as Responses items."""
    ident = f"call_{turn:02d}"
    return [
        {
            "type": "function_call",
            "call_id": ident,
            "name": "exec_command",
            "arguments": json.dumps({"cmd": f"grep -rn handler src/part{turn}"}),
        },
        {"type": "function_call_output", "call_id": ident, "output": output(turn)},
    ]


def play(client: openai.OpenAI, clock: Clock) -> None:
    """The session: a request per turn, each adding a call and its output to the history;
    after every 5th, the history compacted (``responses.compact``) and continued from
    what the compaction gave back (the user's messages and one ``compaction`` item)."""
    headers = {"session-id": SESSION}
    history: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": "Find the slow handler."}
    ]
    for turn in range(REQUESTS):
        clock.now += 10
        client.responses.create(model=MODEL, input=history, extra_headers=headers)  # type: ignore[arg-type]
        history += call(turn)
        if (turn + 1) % COMPACT_EVERY == 0:
            clock.now += 10
            compacted = client.responses.with_raw_response.compact(
                model=MODEL,
                input=history,  # type: ignore[arg-type]
                extra_headers=headers,
            )
            history = json.loads(compacted.text)["output"]


def test_a_session_that_compacts_every_5_requests_is_billed_to_the_token(tmp_path: Any) -> None:
    """The same session through the proxy and sent directly to a second stand-in: what
    the ledger says was billed is, to the token, the sum of every usage the stand-in
    reported, the compactions' included (before: 41.6% of the input tokens were missing,
    the 4 compactions' whole histories); the compactions go as they came, so the estimate
    of the session without the middleware stays near what it cost sent directly, and the
    share saved is not overstated."""
    clock, direct_clock = Clock(), Clock()
    stand_in = Provider(cache=PromptCache(clock), context_chars=10**8)
    control = Provider(cache=PromptCache(direct_clock), context_chars=10**8, record=False)
    with (
        serving(stand_in.app()) as upstream,
        running((stand_in, upstream), tmp_path) as stack,
        serving(control.app()) as direct,
    ):
        stack.proxy.ledger.clock = clock
        through = closed_at_the_end(
            openai.OpenAI(base_url=stack.url + "/v1", api_key="k", max_retries=0)
        )
        play(through, clock)
        play(closed_at_the_end(openai.OpenAI(base_url=direct + "/v1", api_key="k")), direct_clock)
        compactions = [path for path, _, _ in stand_in.accepted if path.endswith("/compact")]
        assert len(compactions) == REQUESTS // COMPACT_EVERY
        billed = reported(stand_in.cache, "responses")  # type: ignore[arg-type]
        assert wait_for(lambda: stack.proxy.ledger.total()["requests"] >= REQUESTS)
        wait_for(lambda: stack.proxy.ledger.total()["requests"] == len(stand_in.accepted), 5)
        ledger = httpx.get(f"{stack.url}/sessions/{SESSION}").json()
        total = httpx.get(stack.url + "/sessions").json()["total"]

    counted = Usage(**{k: ledger["billed"][k] for k in billed.as_dict()})
    missing = 1 - counted.prompt / billed.prompt
    assert missing == 0, f"{missing:.1%} of the input tokens the provider billed are missing"
    assert counted == billed and total["billed"] == ledger["billed"]
    assert ledger["requests"] == REQUESTS + len(compactions) and ledger["unread"] == 0
    assert ledger["unpriced"] == 0 and ledger["models"] == {MODEL: ledger["requests"]}
    assert ledger["billed"]["dollars"] == pytest.approx(GPT_5.dollars(billed), abs=1e-6)
    # The estimate without the middleware against the session sent directly.
    sent_directly = GPT_5.dollars(reported(control.cache, "responses"))  # type: ignore[arg-type]
    assert ledger["without"]["dollars"] == pytest.approx(sent_directly, rel=0.08)
    true_ratio = GPT_5.dollars(billed) / sent_directly
    assert ledger["ratio"] >= true_ratio * 0.92, "the share saved is overstated"


def test_the_ledger_command_and_sessions_show_the_compactions(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    """A compaction is a request of its session in ``/sessions`` and ``chatcli-mw ledger``,
    priced by the model its request named (its answer names none)."""
    from middleware.cli.app import main

    history = [{"type": "message", "role": "user", "content": "Build it."}, *call(0)]
    client = closed_at_the_end(
        openai.OpenAI(base_url=stack.url + "/v1", api_key="k", max_retries=0)
    )
    headers = {"session-id": "one-compaction"}
    client.responses.create(model=MODEL, input=history, extra_headers=headers)  # type: ignore[arg-type]
    client.responses.compact(model=MODEL, input=history, extra_headers=headers)  # type: ignore[arg-type]
    assert wait_for(lambda: stack.proxy.ledger.total()["requests"] >= 1)
    wait_for(lambda: stack.proxy.ledger.total()["requests"] == 2, 5)
    assert (
        stack.provider.raw[-1]
        == json.dumps({"model": MODEL, "input": history}, separators=(",", ":")).encode()
    )  # as it came
    compact_usage = stack.provider.accepted[-1]
    assert compact_usage[0] == "/v1/responses/compact"
    session = httpx.get(stack.url + "/sessions/one-compaction").json()
    assert session["requests"] == 2 and session["unpriced"] == 0
    assert main(["ledger", "one-compaction", "--url", stack.url]) == 0
    assert f"session one-compaction: 2 requests ({MODEL})" in capsys.readouterr().out


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "streamed"])
def test_legacy_completions_and_embeddings_are_billed(
    caching: tuple[Provider, str, Clock], tmp_path: Any, streamed: bool
) -> None:
    """``/v1/completions`` and ``/v1/embeddings`` report a ``usage`` in Chat Completions'
    shape: billed to the session their header names, forwarded as they came (their body
    holds no history), the embeddings priced by their own entry of ``ledger.prices``."""
    provider, upstream, _ = caching
    with running((provider, upstream), tmp_path) as stack:
        client = closed_at_the_end(
            openai.OpenAI(base_url=stack.url + "/v1", api_key="k", max_retries=0)
        )
        headers = {"x-chatcli-session": "beside"}
        prompt = "def handler(request):\n" * 300
        if streamed:
            for _ in client.completions.create(
                model="gpt-3.5-turbo-instruct",
                prompt=prompt,
                stream=True,
                stream_options={"include_usage": True},
                extra_headers=headers,
            ):
                pass
        else:
            client.completions.create(
                model="gpt-3.5-turbo-instruct", prompt=prompt, extra_headers=headers
            )
        client.embeddings.create(
            model="text-embedding-3-small",
            input=["handler one", "handler two"],
            extra_headers=headers,
        )
        wait_for(lambda: stack.proxy.ledger.total()["requests"] == 2, 5)
        session = httpx.get(stack.url + "/sessions/beside").json()
    billed = reported(provider.cache, "openai")  # type: ignore[arg-type]
    assert billed.prompt > 0
    assert {k: session["billed"][k] for k in billed.as_dict()} == billed.as_dict()
    assert session["without"] == session["billed"]  # forwarded as they came
    assert session["unread"] == 0 and session["unpriced"] == 0
    assert session["models"] == {"gpt-3.5-turbo-instruct": 1, "text-embedding-3-small": 1}


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "streamed"])
def test_an_anthropic_compaction_s_own_sampling_is_billed(tmp_path: Any, streamed: bool) -> None:
    """A ``compact_20260112`` edit that compacts: the summary's sampling is reported in
    ``usage.iterations`` (a ``compaction`` entry), not in the top-level fields, and billed
    all the same: the ledger adds it (before: its 52,000 input tokens were missing)."""
    stand_in = Provider(context_chars=10**7)
    edits = {
        "edits": [
            {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
        ]
    }
    messages = [{"role": "user", "content": "An old conversation line. " * 8_000}]
    kw: dict[str, Any] = {"model": "claude-sonnet-5", "max_tokens": 100, "messages": messages,
                          "betas": ["compact-2026-01-12"], "context_management": edits,
                          "extra_headers": {"x-chatcli-session": "compacted"}}  # fmt: skip
    with serving(stand_in.app()) as upstream, running((stand_in, upstream), tmp_path) as stack:
        client = closed_at_the_end(
            anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0)
        )
        if streamed:
            with client.beta.messages.stream(**kw) as stream:
                message = stream.get_final_message()
        else:
            message = client.beta.messages.create(**kw)
        assert message.content[0].type == "compaction"
        assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 1)
        billed = httpx.get(stack.url + "/sessions/compacted").json()["billed"]
    summary = tokens_of(messages)  # the compaction entry's input, as the stand-in reports it
    assert (billed["input"], billed["output"]) == (10 + summary, 5 + 40)
