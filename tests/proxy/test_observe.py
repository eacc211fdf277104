"""Observe mode: every request goes upstream byte for byte as the client sent it, and the
ledger, ``/sessions`` and the console say what the cleaned requests would have cost and
what the steps would have done; a policy reload switches to cleaning, no restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from billing_builders import Clock, output
from proxy_stack import running
from servers import closed_at_the_end
from stand_in import Provider
from waiting import wait_for

from middleware.cli.ledger_views import session_table

MODEL = "claude-sonnet-5"
SESSION = "observed"
SYSTEM = [{"type": "text", "text": "You are a coding agent. " * 400,
           "cache_control": {"type": "ephemeral"}}]  # fmt: skip


def turns(count: int) -> list[list[dict[str, Any]]]:
    """An agent's histories: each turn a grep whose output is over the budget's cap."""
    histories, history = [], [{"role": "user", "content": "Find the slow handler."}]
    for turn in range(count):
        histories.append(json.loads(json.dumps(history)))
        call = {
            "type": "tool_use",
            "id": f"toolu_{turn:02d}",
            "name": "Bash",
            "input": {"command": f"grep -rn handler src/part{turn}"},
        }
        history += [
            {"role": "assistant", "content": [call]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call["id"], "content": output(turn)}
                ],
            },
        ]
    return histories


def as_sent(messages: list[dict[str, Any]]) -> bytes:
    """A body as a client might write it: keys in its own order, its own spacing, and
    escapes a re-encoding would not keep, so that only the bytes as they came pass."""
    body = {"messages": messages, "max_tokens": 16, "system": SYSTEM, "model": MODEL}
    return json.dumps(body, indent=1, ensure_ascii=True).replace('"Find', '"\\u0046ind').encode()


def test_observe_mode_forwards_every_byte_and_projects_the_saving(
    caching: tuple[Provider, str, Clock], tmp_path: Path
) -> None:
    stand_in, upstream, _ = caching
    sent: list[bytes] = []
    with running((stand_in, upstream), tmp_path, **{"proxy.mode": "observe"}) as stack:
        for messages in turns(4):
            body = as_sent(messages)
            sent.append(body)
            answer = httpx.post(stack.url + "/v1/messages", content=body, headers={
                "content-type": "application/json", "anthropic-version": "2023-06-01",
                "x-api-key": "k", "x-chatcli-session": SESSION,
            })  # fmt: skip
            assert answer.status_code == 200, answer.text
        assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 4)
        ledger = httpx.get(f"{stack.url}/sessions/{SESSION}").json()
        page = httpx.get(f"{stack.url}/ui/api/sessions/{SESSION}").json()
        metrics = httpx.get(stack.url + "/metrics").text
    # Byte for byte, as each was sent (the stand-in's log).
    assert stand_in.raw == sent
    # The bill is what was sent; the projection what cleaning would have made of it.
    observe = ledger["observe"]
    assert (observe["answers"], observe["projected"]) == (4, 4)
    assert (
        ledger["saved_dollars"] == 0 and ledger["without"]["dollars"] == ledger["billed"]["dollars"]
    )
    assert observe["billed_dollars"] == pytest.approx(ledger["billed"]["dollars"])
    assert 0 < observe["would_have_dollars"] < 0.5 * observe["billed_dollars"]
    assert observe["would_have_saved_dollars"] == pytest.approx(
        observe["billed_dollars"] - observe["would_have_dollars"], abs=1e-6
    )
    # chatcli-mw ledger says it in words.
    said = [line for line in session_table(ledger) if line.startswith("observe mode")]
    assert said == [
        f"observe mode: 4 of 4 requests projected: billed ${observe['billed_dollars']:.4f}, "
        f"cleaned would have been ${observe['would_have_dollars']:.4f}, would have saved "
        f"${observe['would_have_saved_dollars']:.4f}"
    ]
    # The actions the steps would have taken: each output spilled, shown on the console.
    assert page["row"]["spills"] == 3
    requests = {r["n"]: r for r in page["requests"]}
    assert all(r["observed"] for r in requests.values())
    assert [s["kind"] for s in requests[4]["steps"]].count("spilled") == 1
    assert requests[4]["bill"]["observed"] and requests[4]["bill"]["dollars_projected"] > 0
    assert 'chatcli_proxy_observed_total{outcome="projected"} 4.0' in metrics
    # Nothing was done: no action counted as done.
    assert "chatcli_proxy_actions_total{" not in metrics


def test_switching_from_observe_to_clean_is_a_policy_reload(
    caching: tuple[Provider, str, Clock], tmp_path: Path
) -> None:
    stand_in, upstream, _ = caching
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\nproxy:\n  mode: observe\n")
    with running((stand_in, upstream), tmp_path, str(policy)) as stack:
        client = closed_at_the_end(
            anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0)
        )
        histories = turns(3)
        client.messages.create(
            model=MODEL,
            max_tokens=8,
            system=SYSTEM,
            messages=histories[2],
            extra_headers={"x-chatcli-session": "a"},
        )
        first = json.loads(stand_in.raw[-1])
        policy.write_text("version: 1\nproxy:\n  mode: clean\n")
        assert wait_for(lambda: stack.proxy.settings.mode == "clean", 20)
        client.messages.create(
            model=MODEL,
            max_tokens=8,
            system=SYSTEM,
            messages=histories[2],
            extra_headers={"x-chatcli-session": "b"},
        )
        second = json.loads(stand_in.raw[-1])
    outputs, cleaned = (
        [
            m["content"][0]["content"]
            for m in sent["messages"]
            if m["role"] == "user" and isinstance(m["content"], list)
        ]
        for sent in (first, second)
    )
    assert outputs == [output(0), output(1)]  # observed: as it came
    assert all(len(text) < len(output(0)) / 2 for text in cleaned)  # cleaned: spilled


def test_a_request_past_the_bound_is_not_projected_and_counted(
    caching: tuple[Provider, str, Clock], tmp_path: Path
) -> None:
    """A body larger than proxy.observe_bytes is not held to be projected: it goes as it
    came all the same, its answer is billed as sent, and the metric counts it."""
    stand_in, upstream, _ = caching
    overrides = {"proxy.mode": "observe", "proxy.observe_bytes": 1024}
    with running((stand_in, upstream), tmp_path, **overrides) as stack:
        body = as_sent(turns(2)[1])
        answer = httpx.post(stack.url + "/v1/messages", content=body, headers={
            "content-type": "application/json", "anthropic-version": "2023-06-01",
            "x-api-key": "k", "x-chatcli-session": "big",
        })  # fmt: skip
        assert answer.status_code == 200
        assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 1)
        ledger = httpx.get(f"{stack.url}/sessions/big").json()
        metrics = httpx.get(stack.url + "/metrics").text
    assert stand_in.raw == [body]
    assert (ledger["observe"]["answers"], ledger["observe"]["projected"]) == (1, 0)
    assert ledger["observe"]["would_have_saved_dollars"] == 0
    assert 'chatcli_proxy_observed_total{outcome="full"} 1.0' in metrics
