"""A file that is no transcript this tool reads is refused with the list of what it reads,
never replayed as no request (a Codex rollout read as a Claude Code session used to
replay 0 requests at cost 1.000, without a word)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware.replay.transcripts import load_transcripts

#: The formats every refusal names.
NAMED = (
    "Claude Code session JSONL",
    "Codex CLI rollout JSONL",
    "OpenAI chat message list",
    "tau-bench",
    "SWE-agent .traj",
    "mini-swe-agent .traj.json",
    "request body",
)


def jsonl(*lines: dict[str, Any]) -> str:
    return "\n".join(json.dumps(line) for line in lines) + "\n"


UNKNOWN: dict[str, tuple[str, str, str]] = {
    # name: (file name, content, what the message says was found)
    "JSON lines of another program": (
        "events.jsonl",
        jsonl({"event": "start", "at": 1}, {"event": "stop", "at": 2}),
        "JSON lines that are neither",
    ),
    "Claude Code lines without a user or assistant line": (
        "s.jsonl",
        jsonl(
            {"type": "file-history-snapshot", "snapshot": {}},
            {"type": "summary", "summary": "Fixing tests", "leafUuid": "u1"},
        ),
        "line types file-history-snapshot, summary",
    ),
    "a JSON object of no known format": (
        "config.json",
        json.dumps({"name": "shop", "version": "1.0.0"}),
        "a JSON object with no history",
    ),
    "a list of numbers": ("n.json", json.dumps([1, 2, 3]), "item 0 is not a message"),
    "a list of objects that are not messages": (
        "rows.json",
        json.dumps([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]),
        "item 0 is not a message",
    ),
    "a number": ("n.json", "42", "a JSON int"),
    "an empty list": ("e.json", "[]", "no message"),
}


@pytest.mark.parametrize("case", sorted(UNKNOWN))
def test_what_is_no_known_transcript_is_refused_naming_the_formats(
    tmp_path: Path, case: str
) -> None:
    name, content, found = UNKNOWN[case]
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(middleware.HistoryError) as caught:
        load_transcripts(path)
    message = str(caught.value)
    assert found in message
    for format_name in NAMED:
        assert format_name in message, (format_name, message)


def test_a_transcript_with_no_model_call_is_refused(tmp_path: Path) -> None:
    """Known, but nothing to replay: said, not priced as 0 requests at cost 1.000."""
    path = tmp_path / "r.jsonl"
    path.write_text(jsonl(
        {"timestamp": "2026-06-18T00:57:05.559Z", "type": "session_meta", "payload": {"id": "s"}},
        {"timestamp": "2026-06-18T00:57:06.000Z", "type": "response_item", "payload": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}},
    ), encoding="utf-8")  # fmt: skip
    with pytest.raises(middleware.HistoryError, match="a Codex CLI rollout with no model call"):
        load_transcripts(path)
    history = tmp_path / "h.json"
    history.write_text(json.dumps([{"role": "user", "content": "hi"}]), encoding="utf-8")
    with pytest.raises(middleware.HistoryError, match="a JSON message list with no model call"):
        load_transcripts(history)


def test_text_that_is_not_utf8_is_a_history_error(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type": "user", "message": {"content": "caf\xe9"}}\n')
    with pytest.raises(middleware.HistoryError, match="not UTF-8"):
        load_transcripts(path)
