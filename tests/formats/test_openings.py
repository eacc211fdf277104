"""Each format says what its conversations repeat (:meth:`.Codec.opening`), and the key
of a client that names no session is the digest of that answer: the same, byte for byte,
as the key ``conversations/keys.py`` derived by hand before (tests/session_key_reference.py),
for every format, on the bodies the real clients sent and on bodies of any shape."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from locations import RECORDED
from session_key_reference import reference_key

from middleware.conversations.keys import SessionKey, session_of
from middleware.formats import CODECS, get_codec

FORMATS = sorted(CODECS)

_texts = st.text(max_size=5)
_markers = st.fixed_dictionaries(
    {},
    optional={
        "cache_control": st.just({"type": "ephemeral"}),
        "id": st.text(max_size=3),
        "status": st.sampled_from(["completed", "in_progress"]),
    },
)
_blocks = st.one_of(
    st.builds(lambda text, kind, marks: {"type": kind, "text": text, **marks},
              _texts, st.sampled_from(["text", "input_text", "output_text"]), _markers),
    st.builds(lambda uid, kind: {"type": kind, "id": uid, "name": "f", "input": {}},
              st.text(max_size=3), st.sampled_from(["tool_use", "server_tool_use"])),
    st.builds(lambda text: {"type": "thinking", "thinking": text, "signature": "s"}, _texts),
    st.builds(lambda uid: {"type": "tool_result", "tool_use_id": uid, "content": "out"},
              st.text(max_size=3)),
    st.just({"type": "image", "source": {"type": "base64", "data": "AA"}}),
    st.just({"type": "text", "text": 7}),
    _texts,
)  # fmt: skip
_contents = st.one_of(st.none(), _texts, st.lists(_blocks, max_size=3))
_calls = st.lists(
    st.one_of(st.builds(lambda uid: {"id": uid, "type": "function"}, st.text(max_size=3)),
              st.just("not a call")),
    max_size=2,
)  # fmt: skip
_items = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "role": st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
            "type": st.sampled_from(["message", "function_call", "function_call_output",
                                     "reasoning", "custom_tool_call_output"]),
            "content": _contents,
            "tool_calls": _calls,
            "call_id": st.one_of(st.text(max_size=3), st.integers()),
            "id": st.text(max_size=3),
            "status": st.just("completed"),
        },
    ),
    _texts,
    st.integers(),
)  # fmt: skip
_message_bodies = st.fixed_dictionaries(
    {},
    optional={
        "system": _contents,
        "instructions": _contents,
        "messages": st.one_of(st.lists(_items, max_size=6), _texts),
        "input": st.one_of(st.lists(_items, max_size=6), _texts),
    },
)
_parts = st.one_of(
    st.builds(lambda text, thought: {"text": text, **({"thought": True} if thought else {})},
              _texts, st.booleans()),
    st.builds(lambda uid: {"functionCall": {"name": "f", "id": uid, "args": {}}},
              st.one_of(st.text(max_size=3), st.none())),
    st.just({"functionResponse": {"name": "f", "response": {}}}),
    st.integers(),
)  # fmt: skip
_gemini_bodies = st.fixed_dictionaries(
    {
        "contents": st.lists(
            st.one_of(
                st.fixed_dictionaries(
                    {"parts": st.one_of(st.lists(_parts, max_size=3), st.none())},
                    optional={"role": st.sampled_from(["user", "model"])},
                ),
                _texts,
            ),
            max_size=5,
        )
    },
    optional={"systemInstruction": st.one_of(_texts, st.just({"parts": [{"text": "S"}]}))},
)
_bodies = st.one_of(_message_bodies, _gemini_bodies)


def _key(pair: tuple[str, str]) -> SessionKey:
    return SessionKey(*pair)


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=300)
@given(body=_bodies)
def test_a_formats_opening_keys_a_conversation_as_before(fmt: str, body: dict[str, Any]) -> None:
    codec = get_codec(fmt)
    assert codec.opening(body) is not None  # the format answers it, keys.py reads no shape
    assert session_of({}, body, codec) == _key(reference_key(body, codec))


@settings(max_examples=300)
@given(body=_bodies)
def test_a_body_of_no_known_format_is_keyed_as_before(body: dict[str, Any]) -> None:
    assert session_of({}, body) == _key(reference_key(body, None))


def _recorded_bodies() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(RECORDED.glob("*.json")):
        for request in json.loads(path.read_text("utf-8"))["requests"]:
            body = request["body"]
            for fmt in FORMATS:
                if get_codec(fmt).history_key in body:
                    found.append((fmt, body))
    return found


RECORDED_BODIES = _recorded_bodies()


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_real_clients_bodies_keep_their_keys(fmt: str) -> None:
    """Every recorded request, its session ids taken away, keyed in its format."""
    bodies = [body for name, body in RECORDED_BODIES if name == fmt]
    assert bodies, f"no recorded request in {fmt}"
    codec = get_codec(fmt)
    for body in bodies:
        anonymous = {k: v for k, v in body.items() if k not in ("prompt_cache_key", "metadata")}
        assert codec.opening(anonymous) is not None
        assert session_of({}, anonymous, codec) == _key(reference_key(anonymous, codec))
