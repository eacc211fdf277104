"""The agents' own compaction passes through the proxy untouched: Codex CLI's remote
compaction v2 as the real CLI sends it (tests/recorded/codex-0.171.0-compaction.json, its
``compaction_trigger`` request and the ``compaction`` item it sends back afterwards), the
Responses API's ``/v1/responses/compact`` and ``context_management`` server-side compaction,
and Anthropic's ``compact_20260112`` edit with its ``compaction`` blocks, all against the
strict stand-in, which refuses a compaction item or block that does not come back exactly as
it issued it (the providers cannot read a changed one)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from agents import missing
from locations import RECORDED
from proxy_stack import Stack, running
from servers import closed_at_the_end, serving
from stand_in import Provider, triggered

RECORDING = RECORDED / "codex-0.171.0-compaction.json"


def recorded() -> list[dict[str, Any]]:
    requests: list[dict[str, Any]] = json.loads(RECORDING.read_text("utf-8"))["requests"]
    return requests


def wire(value: Any) -> bytes:
    """``value`` as compact JSON, as Codex writes its bodies (serde_json)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def compaction_related(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        item for item in body["input"] if item.get("type") in ("compaction", "compaction_trigger")
    ]


def issued_in(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The compaction items the recorded run was answered with."""
    return [
        item
        for request in requests
        for item in request["answer"]["output"] or []
        if item.get("type") == "compaction"
    ]


@pytest.mark.skipif(os.environ.get("CHATCLI_RECORD") != "1", reason="CHATCLI_RECORD=1 records")
def test_record_what_codex_sends_when_it_compacts() -> None:
    why = missing("codex")
    if why is not None:
        pytest.skip(why)
    from compaction_recording import record

    record()


def test_the_recording_holds_one_compaction_sent_back_as_issued() -> None:
    """What Codex CLI 0.171 sends: its history with ``{"type": "compaction_trigger"}``
    last (its turn metadata saying ``request_kind: compaction``), answered by one
    ``compaction`` item; every later request, the resumed session's too, holds the
    retained messages and that item, field for field, followed by the model's call in the
    same turn."""
    requests = recorded()
    asks = [i for i, request in enumerate(requests) if triggered(request["body"])]
    assert len(asks) == 1
    ask = requests[asks[0]]
    assert ask["body"]["input"][-1] == {"type": "compaction_trigger"}
    assert ask["headers"]["x-codex-beta-features"] == "remote_compaction_v2"
    assert json.loads(ask["headers"]["x-codex-turn-metadata"])["request_kind"] == "compaction"
    (issued,) = issued_in(requests)
    assert ask["answer"]["output"] == [issued]
    later = requests[asks[0] + 1 :]
    assert len(later) >= 3
    for request in later:
        items = request["body"]["input"]
        (at,) = [i for i, item in enumerate(items) if item.get("type") == "compaction"]
        assert items[at] == {
            "type": "compaction",
            "id": issued["id"],
            "encrypted_content": issued["encrypted_content"],
        }
        assert all(item.get("type") == "message" for item in items[:at])
    assert later[1]["body"]["input"][-2]["type"] == "function_call"  # the call after it


@pytest.mark.parametrize(
    "overrides",
    [{}, {"budget.max_result_chars": 1_000, "budget.turn_budget_chars": 2_000}],
    ids=["default", "spilling"],
)
def test_codex_compaction_requests_reach_the_provider_with_their_compaction_items_unchanged(
    tmp_path: Path, overrides: dict[str, Any]
) -> None:
    """The recorded requests replayed through the proxy, as Codex sent them: the stand-in
    accepts every one, its compaction items and trigger arrive byte for byte (also where
    the proxy rewrote the body: with a small cap the filling output is spilled), the
    trigger still last; the answer to the trigger reaches the client with its one
    compaction item as the stand-in wrote it; nothing is counted as a failure."""
    requests = recorded()
    stand_in = Provider()
    for item in issued_in(requests):
        stand_in.issued(item)  # what the recorded run was given, the later requests carry
    rewritten = 0
    with (
        serving(stand_in.app()) as upstream,
        running((stand_in, upstream), tmp_path, **overrides) as stack,
    ):
        for request in requests:
            raw = wire(request["body"])
            answer = httpx.post(
                stack.url + request["path"], content=raw, headers=request["headers"], timeout=60
            )
            assert answer.status_code == 200, answer.text
            sent = stand_in.raw[-1]
            rewritten += sent != raw
            for item in compaction_related(request["body"]):
                assert wire(item) in sent
            if triggered(request["body"]):
                assert json.loads(sent)["input"][-1] == {"type": "compaction_trigger"}
                (item,) = streamed_items(answer.text)
                assert item["type"] == "compaction"
                assert stand_in.compactions[item["encrypted_content"]] == item
                assert json.dumps(item) in answer.text  # the stand-in's own bytes
        metrics = httpx.get(stack.url + "/metrics").text
    assert not stand_in.refused, [reason for _, reason, _ in stand_in.refused]
    assert "chatcli_proxy_failures_total{" not in metrics
    assert rewritten == (0 if not overrides else 2)  # the two requests with the output


def streamed_items(text: str) -> list[dict[str, Any]]:
    """The items of a Responses stream's ``response.output_item.done`` events."""
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    return [e["item"] for e in events if e.get("type") == "response.output_item.done"]


def test_the_stand_in_refuses_what_openai_refuses_of_compaction(
    provider: tuple[Provider, str],
) -> None:
    """The stand-in's rules the tests rely on: a compaction item it did not issue, or one
    sent back changed (its content, its id), cannot be read; the trigger must be the last
    item and carries nothing but its type (Responses refuses an ``id`` on it)."""
    stand_in, url = provider
    requests = recorded()
    (issued,) = issued_in(requests)
    stand_in.issued(issued)
    after = next(r for r in requests if compaction_related(r["body"]) and not triggered(r["body"]))
    ask = next(r for r in requests if triggered(r["body"]))

    def status(body: dict[str, Any]) -> tuple[int, str]:
        answer = httpx.post(url + "/v1/responses", json=body, timeout=30)
        return answer.status_code, answer.text

    assert status(after["body"])[0] == 200
    assert status(ask["body"])[0] == 200
    for changed in (
        {**issued, "encrypted_content": issued["encrypted_content"][:-3] + "AAA"},
        {**issued, "id": "cmp_other"},
        {"type": "compaction", "encrypted_content": "gAAAAAmade-up"},
    ):
        body = {
            **after["body"],
            "input": [
                changed if item.get("type") == "compaction" else item
                for item in after["body"]["input"]
            ],
        }
        code, text = status(body)
        assert code == 400 and "could not be verified" in text
    items = ask["body"]["input"]
    code, text = status({**ask["body"], "input": [*items[:-2], items[-1], items[-2]]})
    assert code == 400 and "The 'compaction_trigger' item must be the final input item." in text
    code, text = status({**ask["body"], "input": [*items[:-1], {**items[-1], "id": "ct_1"}]})
    assert code == 400 and "Unknown parameter: 'input[" in text


# -- the SDKs: the Responses API's own compaction, Anthropic's -----------------------------


@pytest.fixture
def large_stack(tmp_path: Path) -> Iterator[Stack]:
    """A proxy in front of a stand-in with a window large enough for Anthropic's smallest
    compaction trigger (50,000 tokens)."""
    stand_in = Provider(context_chars=10**7)
    with serving(stand_in.app()) as upstream, running((stand_in, upstream), tmp_path) as stack:
        yield stack


def test_responses_compact_goes_through_untouched_and_its_item_comes_back(stack: Stack) -> None:
    """``POST /v1/responses/compact`` (the OpenAI SDK's ``responses.compact``, Codex's v1
    remote compaction) is not cleaned: forwarded byte for byte, answered as it came, billed
    (tests/proxy/test_billed_routes.py), never a failure; the item it returns, sent back
    in the next request, is accepted."""
    history = [
        {"type": "message", "role": "user", "content": "Build it."},
        {"type": "function_call", "call_id": "call_1", "name": "make", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "built"},
    ]
    with openai.OpenAI(base_url=stack.url + "/v1", api_key="sk-test", max_retries=0) as client:
        compacted = client.responses.with_raw_response.compact(
            model="gpt-5.5",
            input=history,
        )
        assert stack.provider.accepted[-1][0] == "/v1/responses/compact"
        assert stack.provider.raw[-1] == wire({"model": "gpt-5.5", "input": history})
        kept = json.loads(compacted.text)["output"]  # as the stand-in answered
        assert kept[0]["role"] == "user" and kept[-1]["type"] == "compaction"
        assert stack.provider.compactions[kept[-1]["encrypted_content"]] == kept[-1]
        follow = [*kept, {"type": "message", "role": "user", "content": "Go on."}]
        answer = client.responses.create(model="gpt-5.5", input=follow)
        assert answer.output_text == "ok"
        assert json.loads(stack.provider.raw[-1])["input"] == json.loads(wire(follow))
    total = httpx.get(stack.url + "/sessions").json()["total"]
    assert total["requests"] == 2  # the compact call and the next one
    metrics = httpx.get(stack.url + "/metrics").text
    line = 'chatcli_proxy_requests_total{route="/v1/responses/compact",status="200"} 1.0'
    assert line in metrics
    assert "chatcli_proxy_failures_total{" not in metrics
    assert not stack.provider.refused


def test_server_side_compaction_of_responses_passes_through_streamed(stack: Stack) -> None:
    """A Responses request with ``context_management`` (server-side compaction): the field
    arrives as the SDK wrote it, the streamed answer brings the compaction item before the
    reply, and the next request, the item among the model's items and a call unanswered
    after it, is repaired around it: the item unchanged, accepted."""
    management = [{"type": "compaction", "compact_threshold": 1_000}]
    history = [{"type": "message", "role": "user", "content": "Read the logs. " + "x " * 4_000}]
    with openai.OpenAI(base_url=stack.url + "/v1", api_key="sk-test", max_retries=0) as client:
        with client.responses.stream(
            model="gpt-5.5", input=history, context_management=management
        ) as stream:
            final = stream.get_final_response()
        sent = stack.provider.raw[-1]
        assert wire(management) in sent
        output = [item.model_dump(exclude_none=True) for item in final.output]
        assert [item["type"] for item in output] == ["compaction", "message"]
        assert stack.provider.compactions[output[0]["encrypted_content"]] == output[0]
        call = {"type": "function_call", "call_id": "call_9", "name": "make", "arguments": "{}"}
        follow = [*history, *output, call, {"type": "message", "role": "user", "content": "Go on."}]
        client.responses.create(model="gpt-5.5", input=follow, context_management=management)
    arrived = json.loads(stack.provider.raw[-1])
    assert wire(output[0]) in stack.provider.raw[-1]
    kinds = [item.get("type") for item in arrived["input"]]
    assert kinds == ["message", "compaction", "message", "function_call",
                     "function_call_output", "message"]  # fmt: skip
    assert arrived["context_management"] == management
    assert not stack.provider.refused


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "streamed"])
def test_anthropic_compaction_blocks_pass_through(large_stack: Stack, streamed: bool) -> None:
    """Anthropic's ``compact_20260112`` edit through the proxy: ``context_management``
    arrives as the SDK wrote it, the answer's ``compaction`` block reaches the SDK as the
    stand-in wrote it, and sent back (the whole ``content``, as Anthropic says) it arrives
    byte for byte and is accepted, the call beside it still repaired."""
    stack = large_stack
    edits = {
        "edits": [
            {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
        ]
    }
    long = "An old conversation line. " * 8_000  # 208,000 characters: over 50,000 tokens
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": long},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Summarise and go on."},
    ]
    kw: dict[str, Any] = {"model": "claude-sonnet-5", "max_tokens": 1_000, "messages": messages,
                          "betas": ["compact-2026-01-12"], "context_management": edits}  # fmt: skip
    with anthropic.Anthropic(base_url=stack.url, api_key="sk-test", max_retries=0) as client:
        if streamed:
            with client.beta.messages.stream(**kw) as stream:
                message = stream.get_final_message()
        else:
            message = client.beta.messages.create(**kw)
        assert wire(edits) in stack.provider.raw[-1]
        content = [block.model_dump(exclude_none=True) for block in message.content]
        assert content[0]["type"] == "compaction"
        assert stack.provider.compactions[content[0]["encrypted_content"]] == content[0]
        call = {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {}}
        follow = [
            *messages,
            {"role": "assistant", "content": [*content, call]},
            {"role": "user", "content": "Go on."},
        ]
        client.beta.messages.create(**{**kw, "messages": follow})
    arrived = json.loads(stack.provider.raw[-1])
    assert wire(content[0]) in stack.provider.raw[-1]
    assert arrived["messages"][3]["content"] == [*content, call]  # the turn untouched
    assert arrived["messages"][4]["content"][0]["tool_use_id"] == "toolu_9"  # repaired
    assert arrived["context_management"] == edits
    assert not stack.provider.refused


def test_a_wrapped_client_compacts_untouched(provider: tuple[Provider, str]) -> None:
    """``middleware.wrap()`` leaves ``responses.compact`` alone (it bills it, and sends it
    as it came) and cleans the request that carries its item around it."""
    import middleware
    from middleware.integrations.sdk import cleaner_of

    stand_in, url = provider
    history = [
        {"type": "message", "role": "user", "content": "Build it."},
        {"type": "function_call", "call_id": "call_1", "name": "make", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "built"},
    ]
    plain = closed_at_the_end(openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0))
    with middleware.wrap(plain) as client:
        compacted = client.responses.with_raw_response.compact(model="gpt-5.5", input=history)
        assert stand_in.raw[-1] == wire({"model": "gpt-5.5", "input": history})
        kept = json.loads(compacted.text)["output"]
        call = {"type": "function_call", "call_id": "call_2", "name": "make", "arguments": "{}"}
        follow = [*kept, call, {"type": "message", "role": "user", "content": "Go on."}]
        client.responses.create(model="gpt-5.5", input=follow)
        assert cleaner_of(client).ledger.total()["requests"] == 2  # both billed
    arrived = json.loads(stand_in.raw[-1])["input"]
    assert arrived[: len(kept) + 1] == [*kept, call]
    assert arrived[len(kept) + 1]["call_id"] == "call_2"  # its missing output, written
    assert not stand_in.refused
