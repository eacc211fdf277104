"""Wire round trips: parse then render with no edits gives back the input objects
themselves; small edits touch only what they edit."""

from __future__ import annotations

import copy
import dataclasses
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import middleware
from middleware.formats import get_codec
from middleware.view import Conversation, ToolCall, ToolResult

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQ"
    "GAhKmMIQAAAABJRU5ErkJggg=="
)


def anthropic_session() -> list[dict[str, Any]]:
    """A coding session in Anthropic Messages format."""
    return [
        {"role": "user", "content": "The test suite fails on test_parse_dates; please fix it."},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": "Start by running the failing test to see the traceback.",
                    "signature": "EqQBCkYIBxgCKkBsig==",
                },
                {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"},
                {"type": "text", "text": "Let me run the failing test first."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A09q90qw90lq917835lq9",
                    "name": "bash",
                    "input": {
                        "command": "pytest -q tests/test_dates.py::test_parse_dates",
                        "options": {"timeout": 120, "env": {"TZ": "UTC"}, "flags": ["-x", "-q"]},
                    },
                    "x_trace": {"span": "abc123"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01B7zmBq3fNdbBvYcnDvCqEW",
                    "name": "read_file",
                    "input": {"path": "src/dates.py", "range": [1, 80]},
                },
            ],
            "x_model": "claude-sonnet-4",
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
                    "content": "E   ValueError: month must be in 1..12\n1 failed in 0.12s",
                    "is_error": True,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01B7zmBq3fNdbBvYcnDvCqEW",
                    "content": [
                        {"type": "text", "text": "def parse(s):\n    y, d, m = s.split('-')\n"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                        },
                        {"type": "text", "text": "    return date(int(y), int(m), int(d))\n"},
                    ],
                    "x_block_extra": [1, 2, 3],
                },
                {
                    "type": "text",
                    "text": "Keep the public API unchanged.",
                    "cache_control": {"type": "ephemeral"},
                },
            ],
            "x_client": {"ts": 1732341000},
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "The fields are swapped. Let me check the docs too."},
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
                    "name": "web_search",
                    "input": {"query": "ISO 8601 date order"},
                },
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
                    "content": [
                        {
                            "type": "web_search_result",
                            "url": "https://en.wikipedia.org/wiki/ISO_8601",
                            "title": "ISO 8601",
                            "encrypted_content": "EqgfCioIARgBIiQ3YTAw",
                            "page_age": "2 days ago",
                        }
                    ],
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01C",
                    "name": "edit_file",
                    "input": {
                        "path": "src/dates.py",
                        "edits": [{"old": "y, d, m", "new": "y, m, d"}],
                    },
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01C",
                    "content": "Edited src/dates.py (1 change).",
                }
            ],
        },
        {"role": "assistant", "content": "Fixed: the month and day fields were swapped."},
    ]


def openai_session() -> list[dict[str, Any]]:
    """A session in OpenAI Chat Completions format."""
    return [
        {"role": "system", "content": "You are a coding assistant."},
        {"role": "developer", "content": "Prefer small diffs.", "name": "policy"},
        {
            "role": "user",
            "name": "alice",
            "content": [
                {"type": "text", "text": "Why does this chart render blank?"},
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"},
                },
            ],
            "x_client_msg_id": "m-17",
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_abc123",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "chart.py"}'},
                    "x_call_extra": True,
                },
                {
                    "id": "call_def456",
                    "type": "function",
                    "function": {"name": "grep", "arguments": '{"pattern": "plt.show"}'},
                },
            ],
            "x_latency_ms": 812,
        },
        {
            "role": "tool",
            "tool_call_id": "call_abc123",
            "content": "import matplotlib\nmatplotlib.use('Agg')\n",
            "x_tool_meta": {"exit": 0},
        },
        {
            "role": "tool",
            "tool_call_id": "call_def456",
            "name": "grep",
            "content": [
                {"type": "text", "text": "chart.py:40: plt.show()"},
                {"type": "text", "text": "chart.py:52: plt.show()"},
            ],
        },
        {"role": "assistant", "content": "The Agg backend never opens a window."},
        {"role": "user", "content": "Write my password to the log then."},
        {"role": "assistant", "content": None, "refusal": "I can't help with that."},
    ]


def responses_items() -> list[dict[str, Any]]:
    """An OpenAI Responses input list."""
    return [
        {"role": "developer", "content": "Answer briefly."},
        {"role": "user", "content": "List the files and show setup.cfg."},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Also check the CI config."}],
            "x_note": "pasted",
        },
        {
            "type": "reasoning",
            "id": "rs_68a1",
            "summary": [{"type": "summary_text", "text": "Need ls and cat."}],
            "encrypted_content": "gAAAAABoX1...",
        },
        {
            "type": "function_call",
            "id": "fc_68a2",
            "call_id": "call_ls1",
            "name": "shell",
            "arguments": '{"cmd": ["ls", "-la"]}',
            "status": "completed",
        },
        {
            "type": "function_call",
            "id": "fc_68a3",
            "call_id": "call_cat2",
            "name": "shell",
            "arguments": '{"cmd": ["cat", "setup.cfg"]}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_ls1",
            "output": "setup.cfg\nsrc\ntests\n",
            "x_runtime": 0.02,
        },
        {
            "type": "function_call_output",
            "call_id": "call_cat2",
            "output": [
                {"type": "input_text", "text": "[metadata]\nname = demo\n"},
                {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
            ],
        },
        {
            "type": "custom_tool_call",
            "id": "ctc_1",
            "call_id": "call_patch3",
            "name": "apply_patch",
            "input": "*** Begin Patch\n*** End Patch",
        },
        {"type": "custom_tool_call_output", "call_id": "call_patch3", "output": "Done."},
        {"type": "item_reference", "id": "msg_0042"},
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_68a9",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "text": "setup.cfg names the package demo.",
                    "annotations": [],
                }
            ],
        },
    ]


def gemini_contents() -> list[dict[str, Any]]:
    """A Gemini CLI session: an id-less call answered by name, a signed call with an id,
    thoughts, an inline image, unknown fields."""
    return [
        {"role": "user", "parts": [{"text": "<session_context>\ncwd: /repo\n</session_context>"},
                                   {"text": "Why does the build fail?"}], "x_client": 7},
        {"role": "model", "parts": [
            {"text": "Checking the config.", "thought": True, "thoughtSignature": "c2ln"},
            {"functionCall": {"name": "read_file", "args": {"file_path": "/repo/setup.cfg"}},
             "thoughtSignature": "c2lnLTE="},
            {"functionCall": {"id": "run_shell_command_1795_1", "name": "run_shell_command",
                              "args": {"command": "make", "description": "build"}}},
        ]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "read_file",
                                  "response": {"output": "[metadata]\nname = demo\n"}}},
            {"functionResponse": {"id": "run_shell_command_1795_1", "name": "run_shell_command",
                                  "response": {"output": "make: *** [all] Error 2",
                                               "exit_code": 2}, "x_extra": [1, 2]}},
        ]},
        {"role": "model", "parts": [{"text": "setup.cfg names the package demo."}]},
        {"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBORw0"}},
                                   {"text": "And this screenshot?"}]},
    ]  # fmt: skip


SAMPLES = {
    "anthropic": anthropic_session,
    "gemini": gemini_contents,
    "openai": openai_session,
    "responses": responses_items,
}


def _roundtrip(fmt: str, sample: list[Any]) -> None:
    before = copy.deepcopy(sample)
    codec = get_codec(fmt)
    out = codec.render(codec.parse(sample))
    assert out == sample
    assert out is not sample
    assert len(out) == len(sample)
    for got, given_ in zip(out, sample, strict=True):
        assert got is given_
    assert sample == before


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_parse_render_identity(fmt: str) -> None:
    _roundtrip(fmt, SAMPLES[fmt]())


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_pipeline_leaves_valid_history_alone(fmt: str) -> None:
    sample = SAMPLES[fmt]()
    before = copy.deepcopy(sample)
    with middleware.Pipeline.from_policy(None) as pipe:
        result = pipe.process(sample)
    assert result.format == fmt
    assert result.messages == sample
    assert not result.changed
    assert all(a is b for a, b in zip(result.messages, sample, strict=True))
    assert sample == before


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_pipeline_with_given_format_leaves_history_alone(fmt: str) -> None:
    sample = SAMPLES[fmt]()
    with middleware.Pipeline.from_policy(None) as pipe:
        result = pipe.process(sample, format=fmt)
    assert result.messages == sample
    assert not result.changed


def _result_sites(conversation: Conversation) -> list[tuple[int, int, ToolResult]]:
    return [
        (ni, bi, block)
        for ni, node in enumerate(conversation.nodes)
        for bi, block in enumerate(node.blocks)
        if isinstance(block, ToolResult)
    ]


def _call_sites(conversation: Conversation) -> list[tuple[int, int, ToolCall]]:
    return [
        (ni, bi, block)
        for ni, node in enumerate(conversation.nodes)
        for bi, block in enumerate(node.blocks)
        if isinstance(block, ToolCall)
    ]


# -- edits: replace a result's text ------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_replace_each_result_text_changes_only_that_message(fmt: str) -> None:
    sample = SAMPLES[fmt]()
    before = copy.deepcopy(sample)
    codec = get_codec(fmt)
    sites = _result_sites(codec.parse(sample))
    assert sites
    for ni, bi, result in sites:
        conversation = codec.parse(sample)
        conversation.replace_block(ni, bi, result.with_text("short"))
        assert conversation.changed
        out = codec.render(conversation)
        assert len(out) == len(sample)
        for i, (got, orig) in enumerate(zip(out, sample, strict=True)):
            if i == ni:
                assert got is not orig
                assert got != orig
            else:
                assert got is orig
        edited = out[ni]
        # Unknown message keys survive.
        for key in orig_keys(sample[ni]):
            assert key in edited
        assert sample == before


def orig_keys(message: dict[str, Any]) -> list[str]:
    return [k for k in message if k.startswith("x_")]


def test_anthropic_replace_result_keeps_images_flags_and_siblings() -> None:
    sample = anthropic_session()
    before = copy.deepcopy(sample)
    codec = get_codec("anthropic")
    conversation = codec.parse(sample)
    node = conversation.nodes[2]
    result = node.blocks[1]
    assert isinstance(result, ToolResult)
    assert result.has_non_text
    conversation.replace_block(2, 1, result.with_text("short"))
    out = codec.render(conversation)
    message = out[2]
    assert message["x_client"] == {"ts": 1732341000}
    assert message["role"] == "user"
    first, second, third = message["content"]
    assert first is sample[2]["content"][0]  # untouched sibling block is the same object
    assert third is sample[2]["content"][2]
    assert third["cache_control"] == {"type": "ephemeral"}
    assert second["x_block_extra"] == [1, 2, 3]
    assert second["tool_use_id"] == "toolu_01B7zmBq3fNdbBvYcnDvCqEW"
    assert "is_error" not in second
    assert second["content"] == [
        {"type": "text", "text": "short"},
        sample[2]["content"][1]["content"][1],
    ]
    assert second["content"][1]["type"] == "image"
    assert sample == before


def test_anthropic_replace_error_result_keeps_is_error() -> None:
    sample = anthropic_session()
    codec = get_codec("anthropic")
    conversation = codec.parse(sample)
    result = conversation.nodes[2].blocks[0]
    assert isinstance(result, ToolResult) and result.is_error
    conversation.replace_block(2, 0, result.with_text("short"))
    block = codec.render(conversation)[2]["content"][0]
    assert block == {
        "type": "tool_result",
        "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
        "content": "short",
        "is_error": True,
    }
    conversation.replace_block(2, 0, dataclasses.replace(result, is_error=False))
    block = codec.render(conversation)[2]["content"][0]
    assert "is_error" not in block
    assert block["content"] == sample[2]["content"][0]["content"]


def test_openai_replace_list_result_keeps_keys() -> None:
    sample = openai_session()
    codec = get_codec("openai")
    conversation = codec.parse(sample)
    result = conversation.nodes[5].blocks[0]
    assert isinstance(result, ToolResult)
    conversation.replace_block(5, 0, result.with_text("short"))
    message = codec.render(conversation)[5]
    assert message == {
        "role": "tool",
        "tool_call_id": "call_def456",
        "name": "grep",
        "content": [{"type": "text", "text": "short"}],
    }
    conversation.replace_block(4, 0, conversation.nodes[4].blocks[0].with_text("tiny"))  # type: ignore[union-attr]
    message = codec.render(conversation)[4]
    assert message["x_tool_meta"] == {"exit": 0}
    assert message["content"] == "tiny"


def test_responses_replace_list_output_keeps_image() -> None:
    sample = responses_items()
    codec = get_codec("responses")
    conversation = codec.parse(sample)
    result = conversation.nodes[7].blocks[0]
    assert isinstance(result, ToolResult)
    conversation.replace_block(7, 0, result.with_text("short"))
    item = codec.render(conversation)[7]
    assert item["type"] == "function_call_output"
    assert item["call_id"] == "call_cat2"
    assert item["output"][0] == {"type": "input_text", "text": "short"}
    assert item["output"][1] is sample[7]["output"][1]
    conversation.replace_block(6, 0, conversation.nodes[6].blocks[0].with_text("tiny"))  # type: ignore[union-attr]
    item = codec.render(conversation)[6]
    assert item == {
        "type": "function_call_output",
        "call_id": "call_ls1",
        "output": "tiny",
        "x_runtime": 0.02,
    }


# -- edits: delete and insert nodes ------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_delete_and_insert_nodes(fmt: str) -> None:
    sample = SAMPLES[fmt]()
    before = copy.deepcopy(sample)
    codec = get_codec(fmt)
    conversation = codec.parse(sample)
    last = len(sample) - 1
    removed = conversation.delete_node(last)
    assert removed.raw is sample[last]
    assert conversation.changed
    out = codec.render(conversation)
    assert out == sample[:-1]
    assert all(a is b for a, b in zip(out, sample[:-1], strict=True))

    new = ToolResult(call_id="call_new", content="inserted output")
    conversation.insert_node(1, codec.result_node([new]))
    out = codec.render(conversation)
    assert len(out) == len(sample)
    assert out[0] is sample[0]
    assert all(a is b for a, b in zip(out[2:], sample[1:-1], strict=True))
    created = out[1]
    if fmt == "anthropic":
        assert created == {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_new", "content": "inserted output"}
            ],
        }
    elif fmt == "openai":
        assert created == {"role": "tool", "tool_call_id": "call_new", "content": "inserted output"}
    elif fmt == "gemini":
        assert created == {"role": "user", "parts": [{"functionResponse": {
            "id": "call_new", "name": "", "response": {"output": "inserted output"}}}]}  # fmt: skip
    else:
        assert created == {
            "type": "function_call_output",
            "call_id": "call_new",
            "output": "inserted output",
        }
    # The created node parses back as a result with the same id and text.
    reparsed = codec.parse(out)
    (result,) = reparsed.nodes[1].results
    assert (result.call_id, result.text) == ("call_new", "inserted output")
    assert sample == before


def test_anthropic_result_node_shares_one_message() -> None:
    codec = get_codec("anthropic")
    node = codec.result_node(
        [ToolResult("toolu_a", "one"), ToolResult("toolu_b", "two", is_error=True)]
    )
    conversation = Conversation("anthropic", [node])
    (message,) = codec.render(conversation)
    assert message["role"] == "user"
    assert [b["tool_use_id"] for b in message["content"]] == ["toolu_a", "toolu_b"]
    assert message["content"][1]["is_error"] is True


# -- edits: rename call ids --------------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_rename_call_id(fmt: str) -> None:
    sample = SAMPLES[fmt]()
    before = copy.deepcopy(sample)
    codec = get_codec(fmt)
    id_key = {"anthropic": "id", "openai": "id", "responses": "call_id", "gemini": "id"}[fmt]
    for ni, bi, call in _call_sites(codec.parse(sample)):
        conversation = codec.parse(sample)
        conversation.replace_block(ni, bi, dataclasses.replace(call, id="x"))
        out = codec.render(conversation)
        if fmt == "anthropic":
            wire = out[ni]["content"][bi]
            others = [b for j, b in enumerate(out[ni]["content"]) if j != bi]
            kept = [b for j, b in enumerate(sample[ni]["content"]) if j != bi]
            assert all(o is k for o, k in zip(others, kept, strict=True))
        elif fmt == "openai":
            wire = out[ni]["tool_calls"][bi]
        elif fmt == "gemini":  # the id is in the part's functionCall, beside its signature
            assert {k: v for k, v in out[ni]["parts"][bi].items() if k != "functionCall"} == {
                k: v for k, v in call.raw.items() if k != "functionCall"}  # fmt: skip
            wire, raw = out[ni]["parts"][bi]["functionCall"], call.raw["functionCall"]
        else:
            wire = out[ni]
        raw = raw if fmt == "gemini" else call.raw
        assert wire[id_key] == "x"
        assert {k: v for k, v in wire.items() if k != id_key} == {
            k: v for k, v in raw.items() if k != id_key
        }
        assert all(a is b for i, (a, b) in enumerate(zip(out, sample, strict=True)) if i != ni)
        assert sample == before


def test_openai_assistant_without_calls_loses_tool_calls() -> None:
    sample = openai_session()
    codec = get_codec("openai")
    conversation = codec.parse(sample)
    node = conversation.nodes[3]
    assert len(node.calls) == 2
    conversation.replace_node(3, node.with_blocks([]))
    message = codec.render(conversation)[3]
    assert "tool_calls" not in message
    assert message["content"] == ""
    assert message["x_latency_ms"] == 812
    assert sample[3]["content"] is None
    assert len(sample[3]["tool_calls"]) == 2

    # Dropping one of two calls keeps the other entry object.
    conversation = codec.parse(sample)
    node = conversation.nodes[3]
    conversation.replace_node(3, node.with_blocks(node.blocks[1:]))
    message = codec.render(conversation)[3]
    assert message["tool_calls"] == [sample[3]["tool_calls"][1]]
    assert message["tool_calls"][0] is sample[3]["tool_calls"][1]
    assert message["content"] is None


def test_openai_assistant_with_text_keeps_text_when_calls_removed() -> None:
    sample = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
    ]
    codec = get_codec("openai")
    conversation = codec.parse(sample)
    conversation.replace_node(1, conversation.nodes[1].with_blocks([]))
    assert codec.render(conversation)[1] == {"role": "assistant", "content": "Checking."}


# -- random histories --------------------------------------------------------------------

_KEY = st.text(string.ascii_lowercase, min_size=1, max_size=6).map(lambda s: f"x_{s}")
_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.text(max_size=8),
    st.floats(allow_nan=False, allow_infinity=False),
)
_JSON = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_EXTRA = st.dictionaries(_KEY, _JSON, max_size=2)
_TEXT = st.text(min_size=1, max_size=20)
_ID = st.one_of(st.just(""), st.text(string.ascii_letters + string.digits + "_", max_size=10))


def _with(extra: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    return {**extra, **base}


@st.composite
def anthropic_history(draw: st.DrawFn) -> list[dict[str, Any]]:
    text = st.builds(lambda t, e: _with(e, {"type": "text", "text": t}), _TEXT, _EXTRA)
    image = st.builds(
        lambda e: _with(
            e,
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ),
        _EXTRA,
    )
    thinking = st.builds(
        lambda t, e: _with(e, {"type": "thinking", "thinking": t, "signature": "sig"}),
        _TEXT,
        _EXTRA,
    )
    tool_use = st.builds(
        lambda i, n, a, e: _with(e, {"type": "tool_use", "id": i, "name": n, "input": a}),
        _ID,
        _TEXT,
        st.dictionaries(st.text(max_size=5), _JSON, max_size=3),
        _EXTRA,
    )
    result_content = st.one_of(st.none(), _TEXT, st.lists(st.one_of(text, image), max_size=3))

    def tool_result(i: str, c: Any, err: bool | None, e: dict[str, Any]) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": i}
        if c is not None:
            block["content"] = c
        if err is not None:
            block["is_error"] = err
        return _with(e, block)

    result = st.builds(
        tool_result, _ID, result_content, st.one_of(st.none(), st.booleans()), _EXTRA
    )
    user_content = st.one_of(
        st.text(max_size=20), st.lists(st.one_of(result, text, image), max_size=4)
    )
    assistant_content = st.one_of(
        st.text(max_size=20), st.lists(st.one_of(tool_use, text, thinking), max_size=4)
    )
    messages = []
    for _ in range(draw(st.integers(0, 6))):
        role = draw(st.sampled_from(["user", "assistant"]))
        content = draw(user_content if role == "user" else assistant_content)
        messages.append(_with(draw(_EXTRA), {"role": role, "content": content}))
    return messages


@st.composite
def openai_history(draw: st.DrawFn) -> list[dict[str, Any]]:
    text_part = st.builds(lambda t: {"type": "text", "text": t}, _TEXT)
    image_part = st.just({"type": "image_url", "image_url": {"url": "https://e.x/a.png"}})
    content = st.one_of(
        st.text(max_size=20), st.lists(st.one_of(text_part, image_part), max_size=3)
    )
    call = st.builds(
        lambda i, n, a, e: _with(
            e, {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
        ),
        _ID,
        _TEXT,
        st.text(max_size=10),
        _EXTRA,
    )
    messages = []
    for _ in range(draw(st.integers(0, 6))):
        role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))
        message: dict[str, Any] = {"role": role}
        if role == "assistant":
            calls = draw(st.lists(call, max_size=3))
            message["content"] = draw(st.one_of(st.none(), st.text(max_size=10)))
            if calls:
                message["tool_calls"] = calls
        elif role == "tool":
            message["tool_call_id"] = draw(_ID)
            message["content"] = draw(st.one_of(_TEXT, st.lists(text_part, max_size=3)))
        else:
            message["content"] = draw(content)
        if draw(st.booleans()):
            message["name"] = draw(_TEXT)
        messages.append(_with(draw(_EXTRA), message))
    return messages


@st.composite
def responses_history(draw: st.DrawFn) -> list[dict[str, Any]]:
    part = st.one_of(
        st.builds(lambda t: {"type": "input_text", "text": t}, _TEXT),
        st.builds(lambda t: {"type": "output_text", "text": t, "annotations": []}, _TEXT),
        st.just({"type": "input_image", "image_url": "https://e.x/a.png"}),
    )
    easy = st.builds(
        lambda r, c: {"role": r, "content": c},
        st.sampled_from(["user", "assistant", "system", "developer"]),
        st.one_of(st.text(max_size=10), st.lists(part, max_size=2)),
    )
    message = st.builds(
        lambda r, c: {"type": "message", "role": r, "content": c},
        st.sampled_from(["user", "assistant", "system", "developer"]),
        st.lists(part, max_size=3),
    )
    call = st.builds(
        lambda i, n, a: {"type": "function_call", "call_id": i, "name": n, "arguments": a},
        _ID,
        _TEXT,
        st.text(max_size=10),
    )
    output = st.builds(
        lambda i, o: {"type": "function_call_output", "call_id": i, "output": o},
        _ID,
        st.one_of(st.text(max_size=10), st.lists(part, max_size=2)),
    )
    custom = st.builds(
        lambda i, n, a: {"type": "custom_tool_call", "call_id": i, "name": n, "input": a},
        _ID,
        _TEXT,
        st.text(max_size=10),
    )
    custom_out = st.builds(
        lambda i, o: {"type": "custom_tool_call_output", "call_id": i, "output": o},
        _ID,
        st.text(max_size=10),
    )
    other = st.sampled_from(
        [
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"},
            {"type": "item_reference", "id": "msg_1"},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {"type": "local_shell_call_output", "call_id": "ls_1", "output": "ok"},
        ]
    )
    item = st.one_of(easy, message, call, output, custom, custom_out, other)
    return [_with(draw(_EXTRA), copy.deepcopy(draw(item))) for _ in range(draw(st.integers(0, 7)))]


_STRATEGIES = {
    "anthropic": anthropic_history(),
    "openai": openai_history(),
    "responses": responses_history(),
}


@pytest.mark.parametrize("fmt", sorted(_STRATEGIES))
@settings(max_examples=60)
@given(data=st.data())
def test_random_histories_roundtrip(fmt: str, data: st.DataObject) -> None:
    history = data.draw(_STRATEGIES[fmt])
    _roundtrip(fmt, history)


# -- edits of call names and arguments; changed nodes without tool blocks ----------------


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_changed_call_arguments_reach_the_wire(fmt: str) -> None:
    sample = SAMPLES[fmt]()
    before = copy.deepcopy(sample)
    codec = get_codec(fmt)
    new_args: Any = (
        {"path": "other.py"} if fmt in ("anthropic", "gemini") else '{"path": "other.py"}'
    )
    for ni, bi, call in _call_sites(codec.parse(sample)):
        conversation = codec.parse(sample)
        conversation.replace_block(
            ni, bi, dataclasses.replace(call, name="renamed", arguments=new_args)
        )
        out = codec.render(conversation)
        reparsed = codec.parse(out).nodes[ni].blocks[bi]
        assert isinstance(reparsed, ToolCall)
        assert (reparsed.id, reparsed.name, reparsed.arguments) == (call.id, "renamed", new_args)
        assert sample == before


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_changed_nodes_without_tool_blocks_render_as_they_came(fmt: str) -> None:
    sample = SAMPLES[fmt]()
    codec = get_codec(fmt)
    conversation = codec.parse(sample)
    for i, node in enumerate(conversation.nodes):
        if not node.calls and not node.results:
            conversation.replace_node(i, node.with_blocks(node.blocks))
    assert conversation.changed
    assert codec.render(conversation) == sample


def test_openai_created_assistant_without_calls_gets_content() -> None:
    from middleware.view import Node

    codec = get_codec("openai")
    conversation = Conversation("openai", [Node("assistant", ())])
    assert codec.render(conversation) == [{"role": "assistant", "content": ""}]


def test_anthropic_string_content_edit_becomes_blocks() -> None:
    sample = anthropic_session()
    codec = get_codec("anthropic")
    conversation = codec.parse(sample)
    node = conversation.nodes[0]
    conversation.replace_node(0, node.with_blocks([]))
    assert codec.render(conversation)[0] == {"role": "user", "content": []}
    assert sample[0]["content"].startswith("The test suite")


# -- edits on histories with thinking blocks, server tools and unknown fields --------

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}

EDGE_ANTHROPIC: list[dict[str, Any]] = [
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

EDGE_OPENAI: list[dict[str, Any]] = [
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


def test_an_edit_rewrites_only_its_message_and_keeps_unknown_fields_and_images() -> None:
    codec = get_codec("anthropic")
    conversation = codec.parse(EDGE_ANTHROPIC)
    site = next(s for s in conversation.index().results if s.result.call_id == "toolu_01B")
    conversation.replace_block(site.node, site.block, site.result.with_text("short"))
    out = codec.render(conversation)
    assert [a is b for a, b in zip(out, EDGE_ANTHROPIC, strict=True)] == [True, True, False, True]
    block = out[2]["content"][1]
    assert block == {"type": "tool_result", "tool_use_id": "toolu_01B", "x-trace": "t-1",
                     "content": [{"type": "text", "text": "short"}, IMAGE]}  # fmt: skip
    assert out[2]["content"][0] is EDGE_ANTHROPIC[2]["content"][0]


def test_renaming_inserting_and_removing_in_openai() -> None:
    codec = get_codec("openai")
    conversation = codec.parse(EDGE_OPENAI)
    node = conversation.nodes[3]
    renamed = dataclasses.replace(node.blocks[0], id="call_x")
    conversation.replace_node(3, node.with_blocks([renamed]))
    conversation.delete_node(5)
    conversation.insert_node(5, codec.result_node([ToolResult("call_x", "new", is_error=True)]))
    out = codec.render(conversation)
    assert out[3]["tool_calls"] == [{**EDGE_OPENAI[3]["tool_calls"][0], "id": "call_x"}]
    assert out[3]["refusal"] is None
    assert out[5] == {"role": "tool", "tool_call_id": "call_x", "content": "new"}
    conversation.replace_node(3, node.with_blocks([]))
    emptied = codec.render(conversation)[3]
    assert "tool_calls" not in emptied
    assert emptied["content"] == ""


def test_edits_carry_every_other_field_over() -> None:
    """``with_blocks`` and ``with_text`` build the copy field by field (it is on every
    request's path): a field added to the class must be carried too."""
    from dataclasses import fields

    from middleware.view import Node, Opaque, ToolResult

    # Every field is given a value other than its default; a new field fails here until
    # the copies carry it (and this test gives it a value).
    assert [f.name for f in fields(ToolResult)] == [
        "call_id", "content", "is_error", "raw", "text_protocol", "tool_name", "original",
        "sealed",
    ]  # fmt: skip
    assert [f.name for f in fields(Node)] == [
        "role", "blocks", "raw", "origin", "changed", "meta", "raw_chars",
    ]  # fmt: skip
    result = ToolResult("c1", "text", True, {"raw": 1}, True, "Bash", "the original", True)
    copy = result.with_text("new")
    for f in fields(ToolResult):
        if f.name != "content":
            assert getattr(copy, f.name) == getattr(result, f.name), f.name
    assert result.with_text("new", original="other").original == "other"
    node = Node("user", (result,), {"role": "user"}, 3, False, (("k", "v"),), 42)
    edited = node.with_blocks([Opaque({"type": "text", "text": "x"})])
    for f in fields(Node):
        if f.name not in ("blocks", "changed"):
            assert getattr(edited, f.name) == getattr(node, f.name), f.name
    assert edited.changed
