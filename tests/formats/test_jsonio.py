"""Request bodies read and written by orjson when it is installed give exactly what the
standard library gives: the same values (integers past 64 bits included), the same verdicts
on what is not JSON, and bodies that read back as what was written."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from middleware.errors import InputError
from middleware.formats import jsonio

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()  # lone surrogates included
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (1 is not 1.0, -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


@pytest.fixture(params=["orjson", "json"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "orjson":
        pytest.importorskip("orjson", reason="the proxy extra installs orjson")
    else:
        monkeypatch.setattr(jsonio, "orjson", None)
    return str(request.param)


@settings(max_examples=300)
@given(value=VALUES)
def test_a_body_reads_back_as_the_standard_library_reads_it(value: Any) -> None:
    escaped = json.dumps(value).encode()  # ASCII, lone surrogates as escapes
    assert same(jsonio.loads(escaped), json.loads(escaped))
    plain = json.dumps(value, ensure_ascii=False)
    if not any("\ud800" <= c <= "\udfff" for c in plain):
        assert same(jsonio.loads(plain.encode()), json.loads(plain.encode()))


@settings(max_examples=300)
@given(value=VALUES)
def test_what_is_written_reads_back_as_it_was(value: Any) -> None:
    written = jsonio.wire(value)
    written.decode("utf-8")  # valid UTF-8, lone surrogates escaped
    assert same(json.loads(written), value)
    assert b": " not in written or ": " in json.dumps(value)  # compact


@pytest.mark.parametrize(
    "text",
    [
        b'{"n": 123456789012345678901234567890}',  # past 64 bits: exact, not a float
        b'{"n": -18446744073709551617}',
        b'{"id": "12345678901234567890123"}',  # a long run of digits in a string
        b'{"s": "\\ud800 alone"}',
        b'\xef\xbb\xbf{"bom": 1}',
        '{"text": "caf\u00e9"}'.encode("utf-16"),
    ],
)
def test_what_orjson_would_get_wrong_or_refuse_is_read_as_json_reads_it(
    reader: str, text: bytes
) -> None:
    assert same(jsonio.loads(text), json.loads(text))


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (b"[NaN]", "NaN"),
        (b"[1e400]", None),  # infinity: read as the standard library reads it
        (b"{", "not JSON"),
        (b"[" * 100_000, "nested too deeply"),
        (b"\xff\xfe\xfd", "not UTF-8"),
    ],
)
def test_what_is_not_json_gets_the_same_error_either_way(
    reader: str, text: bytes, fragment: str | None
) -> None:
    if fragment is None:
        assert jsonio.loads(text) == [math.inf]
        return
    with pytest.raises(InputError, match=fragment):
        jsonio.loads(text)


def test_a_huge_integer_and_a_lone_surrogate_are_written_all_the_same(reader: str) -> None:
    value = {"n": 10**30, "s": "\udfff", "t": "é"}
    written = jsonio.wire(value)
    assert written == b'{"n":1000000000000000000000000000000,"s":"\\udfff","t":"\xc3\xa9"}'
