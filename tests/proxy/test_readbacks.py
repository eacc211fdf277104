"""Read-backs counted live through the proxy (issue 45, item 2): the agent reading a spilled
output back is counted once in ``/metrics`` (by kind, step and tool) and shown on the
console's record of the request that carries it; a client's ``GET /recall`` is counted by
the step that spilled the output, the console's own reads of it are not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from console_builders import SESSION, big_output, send_to, session_path, spilled_turn
from prometheus_client.parser import text_string_to_metric_families
from proxy_stack import running
from stand_in import Provider
from waiting import wait_for

#: What the agent gets reading part of the spilled output back.
PART = "".join(big_output().splitlines(keepends=True)[100:140])


def metric(url: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Each sample of the counter ``name`` in ``/metrics``, by its labels."""
    text = httpx.get(url + "/metrics", timeout=30).text
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name + "_total"
    }


def read_back(path: str) -> list[dict[str, Any]]:
    """The spilled turn, then a Read of the spill file."""
    return [
        *spilled_turn(),
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_read", "name": "Read",
             "input": {"file_path": path, "offset": 101, "limit": 40}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_read", "content": PART}]},
    ]  # fmt: skip


def test_a_read_of_a_spill_file_is_counted_once_in_the_metrics_and_shown_on_its_request(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    with running(provider, tmp_path) as stack:
        send_to(stack.url, spilled_turn())
        path = str(next((tmp_path / "spill").glob("*/tool-results/*")))
        send_to(stack.url, read_back(path))
        send_to(stack.url, read_back(path))  # a retry: the same call, not counted again
        later = [
            *read_back(path),
            {"role": "assistant", "content": "Read."},
            {"role": "user", "content": "Go on."},
        ]
        send_to(stack.url, later)

        counted = metric(stack.url, "chatcli_proxy_readbacks")
        key = (("kind", "spill_file"), ("step", "budget"), ("tool", "Read"))
        assert counted == {key: 1.0}
        chars = metric(stack.url, "chatcli_proxy_readback_chars")
        assert chars == {(("kind", "spill_file"), ("step", "budget")): float(len(PART))}

        assert wait_for(lambda: len(records(stack.url)) == 4)
        shown = [r.get("readbacks") for r in records(stack.url)]
        assert shown == [None, [{"kind": "spill_file", "tool": "Read", "step": "budget",
                                 "call": "toolu_read", "path": path, "chars": len(PART)}],
                         None, None]  # fmt: skip

        # The ledger prices it (what the session's facts on the console show too), and the
        # effective saving is the saving less that.
        assert wait_for(lambda: stack.proxy.ledger.total()["requests"] == 4)
        ledger = httpx.get(f"{stack.url}/sessions/{SESSION}", timeout=30).json()
        priced = ledger["readbacks"]
        assert priced["count"] == 1 and priced["tokens"] > 0 and priced["dollars"] > 0
        assert ledger["effective_saved_dollars"] == pytest.approx(
            ledger["saved_dollars"] - priced["dollars"], abs=2e-6
        )
        page = httpx.get(stack.url + session_path(), timeout=30).json()
        assert page["ledger"]["readbacks"] == priced
        assert page["row"]["readbacks"] == priced
        bills = [r["bill"] for r in records(stack.url)]
        assert [bill["readbacks"] for bill in bills] == [0, 1, 0, 0]
        assert bills[1]["dollars_readback"] == pytest.approx(priced["dollars"], abs=1e-6)


def records(url: str) -> list[dict[str, Any]]:
    """The console's records of the session's requests, oldest first."""
    answer = httpx.get(url + session_path(), timeout=30)
    return list(answer.json()["requests"]) if answer.status_code == 200 else []


def test_a_clients_recall_is_counted_by_the_step_that_spilled_it_the_consoles_is_not(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    with running(provider, tmp_path) as stack:
        send_to(stack.url, spilled_turn())
        name = next(p.name for p in (tmp_path / "spill").glob("*/tool-results/*"))
        where = f"{stack.url}/recall/{SESSION}/{name}"
        assert httpx.get(where + "?offset=101&limit=40").text == PART
        assert httpx.get(where, headers={"x-chatcli-console": "1"}).status_code == 200
        assert httpx.get(f"{stack.url}/recall/{SESSION}/nothing-0123456789abcdef.txt").is_error
        assert metric(stack.url, "chatcli_proxy_recalls") == {
            (("status", "200"), ("step", "budget")): 1.0,
            (("status", "404"), ("step", "unknown")): 1.0,
        }
