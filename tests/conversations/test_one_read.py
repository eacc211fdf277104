"""The proxy reads a request once and carries the codec of its route: cleaning a body
looks no format up by its name, and the codec it is given is the one that keys, parses
and checks the request."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from record_builders import records_in

import middleware
from middleware.cache.messages import MessageMemo
from middleware.conversations.cleaning import as_it_came, clean_body
from middleware.conversations.keys import session_of
from middleware.conversations.sessions import SessionPool
from middleware.formats import registry
from middleware.formats.text_protocol import TextProtocol
from middleware.formats.wire.anthropic import AnthropicCodec
from middleware.ledger import Ledger, LedgerSettings, Usage, UsageReader
from middleware.plugin.host import PluginHost
from middleware.policy import Policy
from middleware.policy.settings import bind
from middleware.view import Conversation


class _Watched(AnthropicCodec):
    """Anthropic, known by a format of its own (no registry holds it), counting its reads."""

    name = "anthropic-watched"

    def __init__(self) -> None:
        self.parsed = 0
        self.openings = 0

    def opening(self, body: Mapping[str, Any]) -> Any | None:
        self.openings += 1
        return super().opening(body)

    def parse(
        self,
        messages: Sequence[Any],
        rule: TextProtocol | None = None,
        memo: MessageMemo | None = None,
    ) -> Conversation:
        self.parsed += 1
        return super().parse(messages, rule, memo)


BODY = {"model": "m", "max_tokens": 5, "system": "S", "messages": [
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash",
                                       "input": {}}]},
    {"role": "user", "content": "no result: pairing repairs it"},
]}  # fmt: skip


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[tuple[SessionPool, Policy]]:
    policy = middleware.load_policy(
        None, env={}, dotenv_path=False, overrides={"spill.root": str(tmp_path)}
    )
    opened = SessionPool.for_policy(PluginHost.create(load_entrypoints=False), policy)
    yield opened, policy
    opened.close()


def test_cleaning_looks_no_format_up_by_name(
    pool: tuple[SessionPool, Policy], monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions, policy = pool
    codec = _Watched()
    monkeypatch.setattr(registry, "CODECS", {})  # any lookup by name now fails
    cleaned = clean_body(json.dumps(BODY).encode(), codec, {}, sessions, ("p", policy))
    assert cleaned.error is None and cleaned.untouched is None and cleaned.report is not None
    assert cleaned.report.format == codec.name
    assert cleaned.report.format_source == "given"
    assert cleaned.refused is not None  # checked by the codec carried: the call was unanswered
    assert codec.parsed == 1 and codec.openings == 1
    assert cleaned.session == session_of({}, BODY, codec)
    kept = as_it_came(json.dumps(BODY).encode(), codec, {})
    assert kept.session == cleaned.session and kept.footprints is not None


def test_a_body_read_once_is_cleaned_as_process_cleans_it(
    pool: tuple[SessionPool, Policy],
) -> None:
    sessions, policy = pool
    codec = registry.get_codec("anthropic")
    cleaned = clean_body(json.dumps(BODY).encode(), codec, {}, sessions, ("p", policy))
    assert cleaned.report is not None and cleaned.report.changed
    alone = middleware.Pipeline(policy).process(BODY, "anthropic")
    assert json.loads(cleaned.body) == alone.output
    assert cleaned.messages == alone.messages


def test_an_answer_is_read_and_billed_by_the_codec_carried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The proxy's exchange hands its route's codec to the usage reader, and the reader
    to the ledger: neither looks the format up by its name."""
    codec = _Watched()
    monkeypatch.setattr(registry, "CODECS", {})
    reader = UsageReader(codec, "application/json")
    answer = {
        "id": "msg_1",
        "model": "claude-x",
        "content": [],
        "usage": {"input_tokens": 10, "output_tokens": 3},
    }
    reader.feed(json.dumps(answer).encode())
    assert reader.fmt == codec.name and reader.usage == Usage(10, 0, 0, 0, 3)
    ledger = Ledger(records_in())
    chosen = bind(middleware.load_policy(None, env={}, dotenv_path=False), LedgerSettings)
    entry = ledger.record("s", reader.codec, reader.usage, reader.model, chosen)
    assert entry is not None and entry.billed == Usage(10, 0, 0, 0, 3)
    assert ledger.session("s") is not None
