"""Wire formats: parse then write with no step acting gives the input back exactly, detection,
and malformed histories rejected with the message index."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import middleware
from middleware.formats import detect_format, get_codec
from middleware.view import ToolResult

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}

ANTHROPIC: list[dict[str, Any]] = [
    {"role": "user", "content": "Why does test_login fail?"},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Run it first.", "signature": "EqQBCkgIARABGAIi"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
        {"type": "text", "text": "Running the test.", "cache_control": {"type": "ephemeral"}},
        {"type": "tool_use", "id": "toolu_01A", "name": "bash",
         "input": {"command": "pytest -x", "timeout": 120}},
        {"type": "tool_use", "id": "toolu_01B", "name": "screenshot", "input": {}},
    ]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01A", "is_error": True,
         "content": "FAILED tests/test_api.py::test_login - KeyError: 'session_token'"},
        {"type": "tool_result", "tool_use_id": "toolu_01B",
         "content": [{"type": "text", "text": "login page"}, IMAGE], "x-trace": "t-1"},
        {"type": "text", "text": "Also check the docs."},
    ]},
    {"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": "x"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        {"type": "text", "text": "The key is read without a default."},
    ], "x-internal": {"turn": 2}},
]  # fmt: skip

OPENAI: list[dict[str, Any]] = [
    {"role": "system", "content": "You are an airline agent."},
    {"role": "developer", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Cancel ZFA04Y"},
                                 {"type": "image_url", "image_url": {"url": "data:,AA"}}]},
    {"role": "assistant", "content": None, "refusal": None, "tool_calls": [
        {"id": "call_a", "type": "function",
         "function": {"name": "get_reservation", "arguments": "{\"id\": \"ZFA04Y\"}"}},
        {"id": "call_b", "type": "function", "function": {"name": "get_user", "arguments": "{}"}},
    ]},
    {"role": "tool", "tool_call_id": "call_a", "name": "get_reservation", "content": "{\"ok\": 1}"},
    {"role": "tool", "tool_call_id": "call_b", "content": [{"type": "text", "text": "user 7"}]},
    {"role": "assistant", "content": "Cancelled.", "x-latency-ms": 812},
]  # fmt: skip

RESPONSES: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Lisbon?"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "in C"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB"},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather",
     "arguments": "{\"city\": \"Lisbon\"}", "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "{\"c\": 18}"},
    {"type": "custom_tool_call", "call_id": "call_2", "name": "apply_patch", "input": "*** Begin"},
    {"type": "custom_tool_call_output", "call_id": "call_2",
     "output": [{"type": "input_text", "text": "done"}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "18 C"}]},
    {"type": "item_reference", "id": "msg_0"},
]  # fmt: skip

SAMPLES = {"anthropic": ANTHROPIC, "openai": OPENAI, "responses": RESPONSES}


@pytest.mark.parametrize("fmt", SAMPLES)
def test_parse_then_render_gives_the_input_back(fmt: str) -> None:
    sample = SAMPLES[fmt]
    before = copy.deepcopy(sample)
    codec = get_codec(fmt)
    out = codec.render(codec.parse(sample))
    assert out == sample
    assert all(a is b for a, b in zip(out, sample, strict=True))
    assert sample == before


@pytest.mark.parametrize("fmt", SAMPLES)
def test_the_pipeline_leaves_a_valid_history_untouched(fmt: str) -> None:
    sample = SAMPLES[fmt]
    before = copy.deepcopy(sample)
    result = middleware.Pipeline.from_policy(None).process(sample)
    assert result.format == fmt
    assert result.messages == sample
    assert not result.changed
    assert sample == before


def test_an_edit_rewrites_only_its_message_and_keeps_unknown_fields_and_images() -> None:
    codec = get_codec("anthropic")
    conversation = codec.parse(ANTHROPIC)
    site = next(s for s in conversation.index().results if s.result.call_id == "toolu_01B")
    conversation.replace_block(site.node, site.block, site.result.with_text("short"))
    out = codec.render(conversation)
    assert [a is b for a, b in zip(out, ANTHROPIC, strict=True)] == [True, True, False, True]
    block = out[2]["content"][1]
    assert block == {"type": "tool_result", "tool_use_id": "toolu_01B", "x-trace": "t-1",
                     "content": [{"type": "text", "text": "short"}, IMAGE]}  # fmt: skip
    assert out[2]["content"][0] is ANTHROPIC[2]["content"][0]


def test_renaming_inserting_and_removing_in_openai() -> None:
    codec = get_codec("openai")
    conversation = codec.parse(OPENAI)
    node = conversation.nodes[3]
    renamed = replace(node.blocks[0], id="call_x")
    conversation.replace_node(3, node.with_blocks([renamed]))
    conversation.delete_node(5)
    conversation.insert_node(5, codec.result_node([ToolResult("call_x", "new", is_error=True)]))
    out = codec.render(conversation)
    assert out[3]["tool_calls"] == [{**OPENAI[3]["tool_calls"][0], "id": "call_x"}]
    assert out[3]["refusal"] is None
    assert out[5] == {"role": "tool", "tool_call_id": "call_x", "content": "new"}
    conversation.replace_node(3, node.with_blocks([]))
    emptied = codec.render(conversation)[3]
    assert "tool_calls" not in emptied
    assert emptied["content"] == ""


@pytest.mark.parametrize(
    ("messages", "fmt", "evidence"),
    [
        (ANTHROPIC, "anthropic", "message 1: 'thinking' content block"),
        (OPENAI, "openai", "message 1: role 'developer'"),
        (RESPONSES, "responses", "message 1: item of type 'message'"),
        ([], "openai", None),
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], "openai",
         None),
    ],
)  # fmt: skip
def test_detection(messages: list[Any], fmt: str, evidence: str | None) -> None:
    detection = detect_format(messages)
    assert (detection.format, detection.evidence) == (fmt, evidence)


def test_mixed_formats_are_refused_with_both_messages_named() -> None:
    with pytest.raises(middleware.FormatError) as info:
        detect_format([ANTHROPIC[1], OPENAI[4]])
    assert "anthropic (message 0:" in str(info.value)
    assert "openai (message 1: role 'tool')" in str(info.value)


@pytest.mark.parametrize(
    ("fmt", "messages", "index", "reason"),
    [
        ("openai", {"role": "user"}, None, "expected a list of messages, got dict"),
        ("openai", "hello", None, "expected a list of messages, got str"),
        ("openai", [{"role": "user", "content": "x"}, 5], 1, "expected a JSON object, got int"),
        ("openai", [{"content": "x"}], 0, "message has no 'role'"),
        ("openai", [{"role": "robot", "content": "x"}], 0, "unknown role 'robot'"),
        ("anthropic", [{"role": "tool", "content": "x"}], 0, "unknown role 'tool'"),
        ("openai", [{"role": "user", "content": 5}], 0, "content must be a string or a list"),
        ("anthropic", [{"role": "user", "content": {"text": "x"}}], 0, "content must be"),
        ("anthropic", [{"role": "user", "content": ["x"]}], 0, "content part 0 must be"),
        ("anthropic", [{"role": "assistant", "content": [{"type": "tool_use", "id": "t"}]}], 0,
         "(tool_use) 'name' must be a non-empty string"),
        ("anthropic", [{"role": "assistant", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "x"}]}], 0,
         "must be in a user message"),
        ("anthropic", [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}]}], 0,
         "'is_error' must be true or false"),
        ("openai", [{"role": "assistant", "content": None, "tool_calls": {"id": "c"}}], 0,
         "'tool_calls' must be a list"),
        ("openai", [{"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}], 0,
         "has no 'function' object"),
        ("openai", [{"role": "tool", "tool_call_id": 5, "content": "x"}], 0,
         "'tool_call_id' must be a string"),
        ("responses", [{"content": "x"}], 0, "neither a 'type' nor a 'role'"),
    ],
)  # fmt: skip
def test_malformed_histories_name_the_message(
    fmt: str, messages: Any, index: int | None, reason: str
) -> None:
    with pytest.raises(middleware.HistoryError) as info:
        middleware.Pipeline.from_policy(None).process(messages, format=fmt)
    assert info.value.index == index
    assert reason in str(info.value)
    assert str(info.value).startswith("history:" if index is None else f"message {index}:")


def test_missing_empty_and_duplicate_ids_are_not_errors() -> None:
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [
            {"type": "function", "function": {"name": "a", "arguments": "{}"}},
            {"id": "", "type": "function", "function": {"name": "b", "arguments": "{}"}},
            {"id": "d", "type": "function", "function": {"name": "c", "arguments": "{}"}},
            {"id": "d", "type": "function", "function": {"name": "c", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "", "content": "orphan"},
    ]  # fmt: skip
    result = middleware.Pipeline.from_policy(None).process(messages)
    assert middleware.validate(result.messages, "openai") == []


BLOCK = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image", "thinking", "custom"])},
    optional={"text": st.text(max_size=20), "x": st.integers(),
              "cache_control": st.just({"type": "ephemeral"})},
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "assistant"]),
                  st.one_of(st.text(max_size=30), st.lists(BLOCK, max_size=4)),
                  st.dictionaries(st.sampled_from(["x-a", "name", "meta"]), st.integers(),
                                  max_size=2)),
        max_size=8,
    )
)  # fmt: skip
def test_any_well_formed_anthropic_history_round_trips(
    messages: list[tuple[str, Any, dict[str, Any]]],
) -> None:
    history = [{"role": role, "content": content, **extra} for role, content, extra in messages]
    before = copy.deepcopy(history)
    codec = get_codec("anthropic")
    out = codec.render(codec.parse(history))
    assert all(a is b for a, b in zip(out, history, strict=True))
    assert history == before
