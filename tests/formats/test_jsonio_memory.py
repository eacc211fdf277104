"""A large request body is read without a fourteen-fold peak of memory (orjson's reader
sizes its work from the body; issue 26, item 3)."""

from __future__ import annotations

import json
import tracemalloc

from middleware.formats import jsonio


def body(size: int) -> bytes:
    messages = []
    while sum(len(m["content"]) for m in messages) < size:
        messages.append({"role": "user", "content": f"line {len(messages)} " * 40})
    return json.dumps({"model": "m", "messages": messages}).encode()


def test_a_body_over_the_limit_is_read_in_a_few_times_its_size() -> None:
    large = body(jsonio.ORJSON_MAX_BYTES + 1)
    tracemalloc.start()
    try:
        assert jsonio.loads(large) == json.loads(large)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * len(large)
