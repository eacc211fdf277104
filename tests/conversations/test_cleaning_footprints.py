"""A request whose footprint cannot be taken still goes, cleaned, and is billed as sent."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import middleware
from middleware.conversations import cleaning
from middleware.conversations.cleaning import clean_body
from middleware.conversations.sessions import SessionPool
from middleware.formats import get_codec
from middleware.plugin.host import PluginHost


def test_a_failing_footprint_never_fails_the_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    policy = middleware.load_policy(
        None, env={}, dotenv_path=False, overrides={"spill.root": str(tmp_path)}
    )
    pool = SessionPool.for_policy(PluginHost.create(), policy)
    body = {"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "line\n" * 9_000}]},
    ]}  # fmt: skip

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no footprint today")

    monkeypatch.setattr(cleaning, "footprint", broken)
    with caplog.at_level(logging.ERROR):
        raw = json.dumps(body).encode()
        cleaned = clean_body(raw, get_codec("anthropic"), {}, pool, ("p", policy))
    pool.close()
    assert cleaned.error is None and cleaned.report is not None and cleaned.footprints is None
    assert len(cleaned.body) < 20_000  # cleaned all the same: the output was spilled
    assert "could not take the footprint" in caplog.text
