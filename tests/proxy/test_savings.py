"""Savings that are only savings: a repair is reported as the refusal it spared, never as
dollars (the request as it came would have cost nothing: the provider would have refused
it), and what a request saves is what the budget and compaction steps took out of the
request as its repairs left it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import httpx
import sqlalchemy as sa
from billing_builders import Clock, output
from proxy_stack import running
from servers import closed_at_the_end
from stand_in import Provider
from waiting import wait_for

from middleware.cli.ledger_views import session_table
from middleware.records.tables import ANSWERS

MODEL = "claude-sonnet-5"
SYSTEM = [{"type": "text", "text": "You are a coding agent. " * 400,
           "cache_control": {"type": "ephemeral"}}]  # fmt: skip


def use(n: int, command: str = "ls") -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": f"toolu_{n:02d}",
        "name": "Bash",
        "input": {"command": command},
    }


def result(n: int, text: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": f"toolu_{n:02d}", "content": text}


def small(n: int) -> str:
    return f"file_{n}.py\nREADME.md"


def test_a_request_whose_only_change_is_a_repair_saves_nothing_and_says_it_was_refused(
    caching: tuple[Provider, str, Clock], tmp_path: Path
) -> None:
    """An orphan result of 83 KB (its call gone, as after a client's own compaction) is
    dropped, and a call left without a result gets one: the provider would have refused
    both requests with a 400, so neither is a saving in dollars (nor a loss); each counts
    as one refusal spared, with the error it would have been."""
    stand_in, upstream, _ = caching
    orphan = "\n".join(f"log line {i}: " + "x" * 60 for i in range(1_200))  # 83 KB
    assert len(orphan) > 80_000
    dropped = [
        {"role": "user", "content": "Look around."},
        {"role": "assistant", "content": [use(1)]},
        {"role": "user", "content": [result(1, small(1)), result(9, orphan)]},
    ]
    missing = [
        {"role": "user", "content": "Look around."},
        {"role": "assistant", "content": [use(1), use(2, "pwd")]},
        {"role": "user", "content": [result(1, small(1))]},
    ]
    with running((stand_in, upstream), tmp_path) as stack:
        client = closed_at_the_end(
            anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0)
        )
        for session, messages in (("orphan", dropped), ("missing", missing)):
            direct = httpx.post(
                upstream + "/v1/messages",
                json={
                    "model": MODEL,
                    "max_tokens": 8,
                    "system": SYSTEM,
                    "messages": messages,
                },
                headers={"anthropic-version": "2023-06-01", "x-api-key": "k"},
            )
            assert direct.status_code == 400  # as it came, the provider refuses it
            client.messages.create(
                model=MODEL,
                max_tokens=8,
                system=SYSTEM,
                messages=messages,
                extra_headers={"x-chatcli-session": session},
            )
        assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 2)
        ledgers = {s: httpx.get(f"{stack.url}/sessions/{s}").json() for s in ("orphan", "missing")}
        total = httpx.get(stack.url + "/sessions").json()["total"]
        with stack.proxy.records.store().connection() as connection:
            refusals = dict(
                connection.execute(sa.select(ANSWERS.c.session, ANSWERS.c.refused)).all()
            )
    assert refusals == {
        "orphan": "400 messages.2.content.1: unexpected `tool_use_id` found in `tool_result` "
        "blocks: toolu_09. Each `tool_result` block must have a corresponding `tool_use` "
        "block in the previous message.",
        "missing": "400 messages.1: `tool_use` ids were found without `tool_result` blocks "
        "immediately after: toolu_02. Each `tool_use` block must have a corresponding "
        "`tool_result` block in the next message.",
    }
    for ledger in ledgers.values():
        assert ledger["priced"] == 1 and ledger["refused"] == 1
        assert ledger["saved_dollars"] == 0 and ledger["effective_saved_dollars"] == 0
        assert ledger["without"]["dollars"] == ledger["billed"]["dollars"] > 0
    assert total["refused"] == 2 and total["saved_dollars"] == 0
    assert session_table(ledgers["orphan"])[-1] == (
        "1 requests the provider would have refused as they came (a repair made them valid: "
        "not counted as a saving)"
    )


def test_a_repaired_request_saves_what_the_budget_took_out_of_it_and_no_more(
    caching: tuple[Provider, str, Clock], tmp_path: Path
) -> None:
    """A request a repair spared a refusal that also has an output over the budget: the
    saving is the spilled output's, estimated on the repaired request (the orphan's 83 KB
    are not in it)."""
    stand_in, upstream, _ = caching
    orphan = "o" * 83_000
    messages = [
        {"role": "user", "content": "Look around."},
        {"role": "assistant", "content": [use(1, "grep -rn handler src")]},
        {"role": "user", "content": [result(1, output(1)), result(9, orphan)]},
    ]
    with running((stand_in, upstream), tmp_path) as stack:
        client = closed_at_the_end(
            anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0)
        )
        client.messages.create(
            model=MODEL,
            max_tokens=8,
            system=SYSTEM,
            messages=messages,
            extra_headers={"x-chatcli-session": "both"},
        )
        assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 1)
        ledger = httpx.get(f"{stack.url}/sessions/both").json()
    spilled_tokens = len(output(1)) / 4
    saved_tokens = (
        ledger["without"]["cache_write_5m"]
        + ledger["without"]["input"]
        - (ledger["billed"]["cache_write_5m"] + ledger["billed"]["input"])
    )
    assert ledger["refused"] == 1 and ledger["saved_dollars"] > 0
    # What the spill took out, not the orphan's 83,000 characters besides.
    assert 0.5 * spilled_tokens < saved_tokens < 1.5 * spilled_tokens
