"""Digests of long texts within one request (``middleware.cache.digests``): a text object is
digested once per pipeline call however many names are made from it, and the digest is
always the SHA-256 of its UTF-8 form."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import middleware
from middleware.cache import DerivedCache, digests
from middleware.cache.digests import MIN_REMEMBERED_CHARS, request_scope, text_digest


class Counted:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.texts: list[int] = []
        digest = digests._digest

        def counted(text: str) -> str:
            self.texts.append(len(text))
            return digest(text)

        monkeypatch.setattr(digests, "_digest", counted)


@given(st.text())
def test_the_digest_is_sha256_of_the_utf8_form(text: str) -> None:
    expected = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    assert text_digest(text) == expected
    with request_scope():
        assert text_digest(text) == expected
        assert text_digest(text) == expected


def test_a_text_is_digested_once_within_a_scope(monkeypatch: pytest.MonkeyPatch) -> None:
    counted = Counted(monkeypatch)
    long, short = "x" * MIN_REMEMBERED_CHARS, "y" * 10
    equal_but_another = "".join(["x"] * MIN_REMEMBERED_CHARS)
    with request_scope():
        for _ in range(3):
            text_digest(long)
            text_digest(short)
        with request_scope():  # a nested scope shares the outer one's
            text_digest(long)
        assert text_digest(equal_but_another) == text_digest(long)
    assert counted.texts.count(len(long)) == 2  # the same text, and an equal other object
    assert counted.texts.count(len(short)) == 3  # short texts are not remembered
    text_digest(long)  # outside a scope, digested each time
    assert counted.texts.count(len(long)) == 3


def test_a_pipeline_call_digests_each_long_result_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Its spill name, the name of its outline and of its summary's reading: one digest,
    even when the cache keeps nothing."""
    counted = Counted(monkeypatch)
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for i in range(6):
        text = "".join(f"src/m{i}/f{n}.py:{n}: value_{i}_{n}\n" for n in range(2_000 + i))
        messages += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": text}],
            },
        ]

    def pipeline(root: Path, cache: DerivedCache) -> middleware.Pipeline:
        overrides = {"spill": {"root": str(root)}}
        policy = middleware.load_policy(None, env={}, dotenv_path=False, overrides=overrides)
        return middleware.Pipeline(policy, session_id="d", cache=cache)

    first = pipeline(tmp_path / "a", DerivedCache(64_000_000)).process(messages, "anthropic")
    assert sum(a.kind == "spilled" for a in first.report.actions) >= 5
    long = [n for n in counted.texts if n >= 50_000]
    assert len(long) == len(set(long)) == 6  # each of the six results, once
    other = pipeline(tmp_path / "b", DerivedCache(0)).process(messages, "anthropic")
    assert json.dumps(other.output).replace(str(tmp_path / "b"), "~") == json.dumps(
        first.output
    ).replace(str(tmp_path / "a"), "~")
