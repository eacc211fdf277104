"""Request bodies: the history is found where each format keeps it and written back with
every other field untouched."""

from __future__ import annotations

import pytest

from middleware.errors import FormatError
from middleware.formats.bodies import read_body


def test_anthropic_and_chat_bodies_keep_their_history_in_messages() -> None:
    document = {"model": "m", "system": [{"type": "text", "text": "s"}], "messages": [{"x": 1}],
                "metadata": {"user_id": "u"}, "unknown_field": True}  # fmt: skip
    body = read_body(document, "anthropic")
    assert body is not None and body.key == "messages" and body.history == [{"x": 1}]
    out = body.with_history([{"y": 2}])
    assert out == {**document, "messages": [{"y": 2}]}
    assert document["messages"] == [{"x": 1}]  # never mutated
    auto = read_body(document)
    assert auto is not None and auto.format_hint is None


def test_responses_bodies_keep_it_in_input_string_or_list() -> None:
    body = read_body({"model": "m", "input": "hi", "instructions": "be brief"})
    assert body is not None and body.format_hint == "responses" and body.history == "hi"
    assert not body.continues_stored_state
    stored = read_body({"input": [], "previous_response_id": "resp_1"}, "responses")
    assert stored is not None and stored.continues_stored_state


def test_what_is_not_a_body_is_none() -> None:
    assert read_body([{"role": "user"}]) is None
    assert read_body({"prompt": "legacy completions"}) is None
    assert read_body({"input": []}, "anthropic") is None  # the route wants messages
    with pytest.raises(FormatError, match="unknown format"):
        read_body({"messages": []}, "cohere")
