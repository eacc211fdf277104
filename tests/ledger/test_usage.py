"""Reading the usage of an answer in each wire format, whole or streamed in any chunks."""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from middleware.ledger import Usage, UsageReader, read_usage, usage

ANTHROPIC = {
    "input_tokens": 7,
    "cache_creation_input_tokens": 300,
    "cache_read_input_tokens": 9000,
    "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
    "output_tokens": 42,
    "service_tier": "standard",
}
CHAT = {
    "prompt_tokens": 5000,
    "completion_tokens": 12,
    "total_tokens": 5012,
    "prompt_tokens_details": {"cached_tokens": 4096, "audio_tokens": 0},
}
RESPONSES = {
    "input_tokens": 2000,
    "input_tokens_details": {"cached_tokens": 1024},
    "output_tokens": 30,
    "output_tokens_details": {"reasoning_tokens": 20},
    "total_tokens": 2030,
}


def test_each_format_is_read_by_kind() -> None:
    assert read_usage("anthropic", ANTHROPIC) == Usage(7, 9000, 100, 200, 42)
    assert read_usage("openai", CHAT) == Usage(904, 4096, 0, 0, 12)
    assert read_usage("responses", RESPONSES) == Usage(976, 1024, 0, 0, 30)
    # Without the split by lifetime, every write is a 5-minute one.
    plain = {"input_tokens": 1, "cache_creation_input_tokens": 50, "output_tokens": 2}
    assert read_usage("anthropic", plain) == Usage(1, 0, 50, 0, 2)
    assert Usage(7, 9000, 100, 200, 42).prompt == 9307


def test_what_is_not_a_usage_is_none_and_odd_values_count_nothing() -> None:
    assert read_usage("anthropic", None) is None
    assert read_usage("openai", {"total_tokens": 3}) is None
    odd = {"input_tokens": True, "output_tokens": -4, "cache_read_input_tokens": "9"}
    assert read_usage("anthropic", odd) == Usage()
    # More cached than the prompt holds is clipped to the prompt.
    assert read_usage("openai", {**CHAT, "prompt_tokens_details": {"cached_tokens": 9999}}) == (
        Usage(0, 5000, 0, 0, 12)
    )


def sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    out = b""
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out += f"{head}data: {json.dumps(data)}\r\n\r\n".encode()
    return out


STREAMS = {
    "anthropic": sse([
        ("message_start", {"type": "message_start", "message": {
            "model": "claude-sonnet-5", "usage": {**ANTHROPIC, "output_tokens": 1}}}),
        ("content_block_delta", {"type": "content_block_delta",
                                 "delta": {"type": "text_delta", "text": "the usage is fine"}}),
        ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 42}}),
        ("message_stop", {"type": "message_stop"}),
    ]),
    "openai": sse([
        (None, {"model": "gpt-4.1", "choices": [{"delta": {"content": "hi"}}], "usage": None}),
        (None, {"model": "gpt-4.1", "choices": [], "usage": CHAT}),
    ]) + b"data: [DONE]\n\n",
    "responses": sse([
        ("response.created", {"type": "response.created", "response": {"usage": None}}),
        ("response.completed", {"type": "response.completed",
                                "response": {"model": "gpt-5", "usage": RESPONSES}}),
    ]),
}  # fmt: skip
EXPECTED = {
    "anthropic": (Usage(7, 9000, 100, 200, 42), "claude-sonnet-5"),
    "openai": (Usage(904, 4096, 0, 0, 12), "gpt-4.1"),
    "responses": (Usage(976, 1024, 0, 0, 30), "gpt-5"),
}


@given(fmt=st.sampled_from(sorted(STREAMS)), cuts=st.lists(st.integers(0, 4000), max_size=12))
def test_a_stream_cut_anywhere_reads_the_same(fmt: str, cuts: list[int]) -> None:
    data = STREAMS[fmt]
    reader = UsageReader(fmt, "text/event-stream; charset=utf-8")
    at = 0
    for cut in sorted({min(c, len(data)) for c in cuts}):
        reader.feed(data[at:cut])
        at = cut
    reader.feed(data[at:])
    assert (reader.usage, reader.model) == EXPECTED[fmt]


def test_newer_anthropic_streams_repeat_the_input_counts_in_the_last_delta() -> None:
    data = sse([
        ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3,
                           "output_tokens": 1}}}),
        ("message_delta", {"type": "message_delta", "usage": {
            "input_tokens": 3, "cache_read_input_tokens": 80, "output_tokens": 9}}),
    ])  # fmt: skip
    reader = UsageReader("anthropic", "text/event-stream")
    reader.feed(data)
    assert reader.usage == Usage(3, 80, 0, 0, 9)


def test_a_json_answer_plain_gzip_or_deflate() -> None:
    answer = json.dumps({"model": "claude-opus-5", "usage": ANTHROPIC}).encode()
    for encoding, body in (
        ("", answer),
        ("gzip", gzip.compress(answer)),
        ("deflate", zlib.compress(answer)),
    ):
        reader = UsageReader("anthropic", "application/json", encoding)
        for i in range(0, len(body), 7):
            reader.feed(body[i : i + 7])
        assert reader.usage == Usage(7, 9000, 100, 200, 42), encoding
        assert reader.model == "claude-opus-5"


def test_what_cannot_be_read_gives_no_usage() -> None:
    brotli = UsageReader("anthropic", "application/json", "br")
    brotli.feed(b"\x1b\x00 not readable")
    assert brotli.usage is None and not brotli.readable
    broken = UsageReader("anthropic", "application/json", "gzip")
    broken.feed(b"not gzip at all")
    assert broken.usage is None
    cut = UsageReader("openai", "text/event-stream")
    cut.feed(STREAMS["openai"][:60])  # the stream broke off before its usage
    assert cut.usage is None
    error = UsageReader("anthropic", "application/json")
    error.feed(b'{"type": "error", "error": {"message": "overloaded"}}')
    assert error.usage is None


def newlines(size: int, wbits: int = 16 + zlib.MAX_WBITS) -> bytes:
    """``size`` newlines, compressed (gzip by default): a decompression bomb."""
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = b"\n" * (1 << 20)
    return b"".join([packer.compress(block) for _ in range(size >> 20)] + [packer.flush()])


def test_a_bomb_is_inflated_no_further_than_its_bound_and_gives_no_usage() -> None:
    bomb = newlines(32 << 20)  # 32 MiB from 32 KB
    for content_type, bound in (
        ("text/event-stream", usage.INFLATION_FLOOR),
        ("application/json", usage.INFLATION_FLOOR),
    ):
        reader = UsageReader("anthropic", content_type, "gzip")
        head = gzip.compress(STREAMS["anthropic"][:300])[:-8]  # a usage first, then the bomb
        reader.feed(head[:10])
        for i in range(0, len(bomb), 1000):
            reader.feed(bomb[i : i + 1000])
        # One chunk of 1,000 bytes may give 1 MiB and 64,000 bytes, and the first past
        # that ended the reading: what was read before is not the whole bill.
        assert reader.inflated <= bound + usage.INFLATION_RATIO * 1000 + 1
        assert reader.usage is None


def test_a_compressed_stream_is_read_up_to_its_total_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(usage, "MAX_INFLATED_BYTES", 64 * 1024)
    filler = sse([("ping", {"type": "ping", "note": "x" * 100})] * 1000)  # 130 KB
    for body, expected in (
        (STREAMS["anthropic"], EXPECTED["anthropic"][0]),
        (filler + STREAMS["anthropic"], None),
    ):
        packer = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        reader = UsageReader("anthropic", "text/event-stream", "gzip")
        for i in range(0, len(body), 4096):  # flushed as a server flushes each event
            reader.feed(packer.compress(body[i : i + 4096]) + packer.flush(zlib.Z_SYNC_FLUSH))
        reader.feed(packer.flush())
        assert reader.usage == expected
        assert reader.inflated <= 64 * 1024 + 1


def test_reading_a_chunk_holds_memory_of_its_size() -> None:
    """Lines are found in the chunk, not split out of it: 4 MiB of newlines hold a few
    KB while read, not a list of millions of lines; lines that name a usage that is none
    are each read and let go."""
    for chunk in (b"\n" * (4 << 20), b"data: usage\n" * 5000):
        reader = UsageReader("anthropic", "text/event-stream")
        tracemalloc.start()
        try:
            reader.feed(chunk)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 1 << 20, peak
        assert reader.usage is None


def test_a_line_over_its_bound_is_dropped_to_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usage, "MAX_LINE_BYTES", 1000)
    long_line = b"data: " + json.dumps({"usage": {"input_tokens": 1}, "x": "y" * 2000}).encode()
    data = long_line + b"\n\n" + STREAMS["anthropic"]
    reader = UsageReader("anthropic", "text/event-stream")
    for i in range(0, len(data), 100):
        reader.feed(data[i : i + 100])
    assert (reader.usage, reader.model) == EXPECTED["anthropic"]
