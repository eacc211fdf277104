"""Wire-format detection, and process(format=...) overriding it."""

from __future__ import annotations

from typing import Any

import pytest

import middleware
from middleware.formats import detect_format as detect_from_formats

ANTHROPIC: list[dict[str, Any]] = [
    {"role": "user", "content": "Run the tests."},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Run pytest.", "signature": "sig=="},
            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "pytest"}},
        ],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "3 passed"}],
    },
    {"role": "assistant", "content": "All green."},
]

OPENAI: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Run the tests."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"cmd": "pytest"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "3 passed"},
    {"role": "assistant", "content": "All green."},
]

RESPONSES: list[dict[str, Any]] = [
    {"role": "developer", "content": "Be brief."},
    {"role": "user", "content": "Run the tests."},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"},
    {"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "3 passed"},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "All green.", "annotations": []}],
    },
]

PLAIN: list[dict[str, Any]] = [
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "hi, how can I help?"},
    {"role": "user", "content": "tell me a joke"},
]


def test_api_exports_detect_format() -> None:
    assert middleware.detect_format is detect_from_formats


@pytest.mark.parametrize(
    ("messages", "fmt", "evidence"),
    [
        (ANTHROPIC, "anthropic", "message 1: 'thinking' content block"),
        (OPENAI, "openai", "message 2: 'tool_calls' field"),
        (RESPONSES, "responses", "message 2: item of type 'reasoning'"),
    ],
)
def test_detects_each_format(messages: list[Any], fmt: str, evidence: str) -> None:
    detection = middleware.detect_format(messages)
    assert detection.format == fmt
    assert detection.evidence == evidence


def test_empty_history_defaults_to_openai() -> None:
    detection = middleware.detect_format([])
    assert detection.format == "openai"
    assert detection.evidence is None


def test_plain_role_content_is_ambiguous() -> None:
    detection = middleware.detect_format(PLAIN)
    assert detection.format == "openai"
    assert detection.evidence is None


def test_plain_history_processes_as_ambiguous() -> None:
    with middleware.Pipeline.from_policy(None) as pipe:
        result = pipe.process(PLAIN)
    assert result.format == "openai"
    assert result.report.format_source == "ambiguous"
    assert result.messages == PLAIN
    assert not result.changed


@pytest.mark.parametrize(
    ("fmt", "extra"),
    [
        ("anthropic", {"role": "user", "content": [{"type": "image_url", "image_url": {}}]}),
        ("anthropic", {"type": "function_call_output", "call_id": "c", "output": "x"}),
        ("openai", {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}),
        ("openai", {"role": "user", "content": [{"type": "input_text", "text": "x"}]}),
    ],
)
def test_mixed_formats_raise_format_error_naming_messages(fmt: str, extra: dict[str, Any]) -> None:
    base = ANTHROPIC if fmt == "anthropic" else OPENAI
    messages = [*base, extra]
    with pytest.raises(middleware.FormatError) as info:
        middleware.detect_format(messages)
    text = str(info.value)
    assert "mixed" in text
    assert f"message {len(base)}:" in text
    assert "message 1:" in text or "message 2:" in text
    assert isinstance(info.value, middleware.HistoryError)
    with middleware.Pipeline.from_policy(None) as pipe, pytest.raises(middleware.FormatError):
        pipe.process(messages)


def test_mixed_anthropic_and_openai_names_both() -> None:
    messages = [ANTHROPIC[1], OPENAI[3]]
    with pytest.raises(
        middleware.FormatError, match=r"anthropic \(message 0: .*openai \(message 1"
    ):
        middleware.detect_format(messages)


def test_responses_easy_messages_with_input_text_parts() -> None:
    messages = [
        {"role": "user", "content": [{"type": "input_text", "text": "What is in this image?"}]},
        {
            "role": "user",
            "content": [{"type": "input_image", "image_url": "https://example.com/cat.png"}],
        },
    ]
    detection = middleware.detect_format(messages)
    assert detection.format == "responses"
    assert detection.evidence == "message 0: 'input_text' content part"


def test_developer_role_does_not_clash_with_responses_items() -> None:
    messages = [
        {"role": "developer", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    ]
    assert middleware.detect_format(messages).format == "responses"


def test_developer_role_alone_reads_as_openai() -> None:
    messages = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    detection = middleware.detect_format(messages)
    assert detection.format == "openai"
    assert detection.evidence == "message 0: role 'developer'"


def test_anthropic_image_block_with_source() -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {
                    "type": "image",
                    "source": {"type": "url", "url": "https://example.com/cat.png"},
                },
            ],
        }
    ]
    assert middleware.detect_format(messages).format == "anthropic"


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "responses"])
def test_given_format_overrides_detection(fmt: str) -> None:
    with middleware.Pipeline.from_policy(None) as pipe:
        result = pipe.process(PLAIN, format=fmt)
    assert result.format == fmt
    assert result.report.format == fmt
    assert result.report.format_source == "given"
    assert result.messages == PLAIN
    assert not result.changed


@pytest.mark.parametrize(
    ("messages", "fmt"),
    [(ANTHROPIC, "anthropic"), (OPENAI, "openai"), (RESPONSES, "responses")],
)
def test_auto_and_given_agree(messages: list[Any], fmt: str) -> None:
    with middleware.Pipeline.from_policy(None) as pipe:
        auto = pipe.process(messages)
        given = pipe.process(messages, format=fmt)
    assert auto.format == given.format == fmt
    assert auto.report.format_source.startswith("message ")
    assert given.report.format_source == "given"
    assert auto.messages == given.messages == messages


def test_given_format_skips_mixed_detection() -> None:
    # Readable as Responses items although detection would call it mixed.
    messages = [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    with pytest.raises(middleware.FormatError):
        middleware.detect_format(messages)
    with middleware.Pipeline.from_policy(None) as pipe:
        result = pipe.process(messages, format="responses")
    assert result.report.format_source == "given"
    assert result.messages == messages


@pytest.mark.parametrize("name", ["cohere", "Anthropic", "", "chat"])
def test_unknown_format_name(name: str) -> None:
    with (
        middleware.Pipeline.from_policy(None) as pipe,
        pytest.raises(middleware.FormatError) as info,
    ):
        pipe.process(PLAIN, format=name)
    assert repr(name) in str(info.value)
    assert "anthropic" in str(info.value)


@pytest.mark.parametrize("value", [{"role": "user"}, "hello", None, 42])
def test_detect_rejects_non_list(value: Any) -> None:
    with pytest.raises(middleware.HistoryError) as info:
        middleware.detect_format(value)
    assert info.value.index is None
    assert not isinstance(info.value, middleware.FormatError)


def test_detect_skips_non_dict_entries() -> None:
    detection = middleware.detect_format(["junk", 3, *OPENAI])
    assert detection.format == "openai"
    assert detection.evidence == "message 4: 'tool_calls' field"
