"""Codex CLI rollouts read as the Responses requests Codex sent, on small rollouts built
like real ones (tests/codex_rollout_builders.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import codex_rollout_builders as cx
import pytest

import middleware
from middleware.replay.transcripts import Transcript, load_transcripts


def load(tmp_path: Path, lines: list[dict[str, Any]], name: str = "rollout.jsonl") -> list[Any]:
    return load_transcripts(cx.write(tmp_path / name, lines))


@pytest.mark.parametrize(
    "name", ["rollout-2026-06-18T00-57-05-019ed836.jsonl", "019ed836-b1da.jsonl", "session.txt"]
)
def test_a_rollout_is_known_by_its_lines_whatever_its_name(tmp_path: Path, name: str) -> None:
    loaded = load(tmp_path, cx.rollout(), name)
    assert [t.name for t in loaded] == [f"{name}#0", f"{name}#1"]
    assert {(t.source, t.format) for t in loaded} == {("codex", "responses")}
    assert tuple(t.request_count for t in loaded) == cx.ROLLOUT_REQUESTS


def test_the_history_is_the_response_items_as_codex_sent_them(tmp_path: Path) -> None:
    lines = cx.rollout()
    first, second = load(tmp_path, lines)
    cut = next(i for i, line in enumerate(lines) if line["type"] == "compacted")
    sent = [line["payload"] for line in lines[:cut] if line["type"] == "response_item"]
    assert first.messages == sent  # as they are: reasoning, content-list output, web search
    assert not any(cx.BASE_INSTRUCTIONS in json.dumps(m) for m in first.messages)
    assert {"type": "reasoning", "summary": []} in first.messages  # encrypted_content gone
    assert any(m.get("encrypted_content") == "REDACTED" for m in first.messages)
    assert middleware.check_history(first.messages, "responses") == []
    # The last call of the recording has no output: it stays, and pairing repair sees it.
    (missing,) = middleware.check_history(second.messages, "responses")
    assert missing.code == "missing_result" and "call_g" in missing.reason


def test_each_request_is_the_history_before_a_model_call(tmp_path: Path) -> None:
    first, second = load(tmp_path, cx.rollout())
    # developer, user | reasoning, comment, 2 calls, 2 outputs | reasoning, patch, output |
    # call, web search, output | answer | user | reasoning, tool search, its output
    assert [len(r) for r in first.requests()] == [2, 8, 11, 14, 16]
    # The compacted history (two user messages and the compaction item) opens the next
    # segment: its first request holds all three, the compaction item too.
    assert [len(r) for r in second.requests()] == [3, 6]


def test_a_compacted_line_restarts_from_its_replacement_history(tmp_path: Path) -> None:
    lines = cx.rollout()
    number = next(i for i, line in enumerate(lines, 1) if line["type"] == "compacted")
    _, second = load(tmp_path, lines)
    restored = lines[number - 1]["payload"]["replacement_history"]
    assert second.messages[: len(restored)] == restored
    assert second.restored == len(restored) == 3
    assert second.notes == (f"restarted from the compacted history on line {number} (3 items)",)
    # Nothing recorded after it repeats an item of it.
    after = second.messages[len(restored) :]
    assert not any(item in restored for item in after)


def test_items_are_timed_by_their_lines(tmp_path: Path) -> None:
    first, second = load(tmp_path, cx.rollout())
    assert len(first.message_times) == len(first.messages)
    start = cx.START.timestamp()

    def offsets(transcript: Transcript) -> list[float]:
        return [round(t - start, 3) for t in transcript.request_times() if t is not None]

    assert offsets(first) == [5, 10, 20, 30, 605]
    assert offsets(second) == [710, 730]
    # The restored history is as old as the compaction.
    assert second.message_times[:3] == (start + 700,) * 3


def test_a_resumed_session_repeats_session_meta_and_nothing_else(tmp_path: Path) -> None:
    lines = [
        cx.session_meta(0),
        cx.message("user", "List the files.", 1),
        cx.exec_call("call_1", "ls", 2),
        cx.exec_output("call_1", "a.ts", 3),
        cx.message("assistant", "One file.", 4),
        cx.session_meta(100),  # the resume
        cx.turn_context(100),
        cx.message("user", "And now?", 101),
        cx.message("assistant", "Still one.", 102),
    ]
    (transcript,) = load(tmp_path, lines)
    assert transcript.name == "rollout.jsonl" and transcript.notes == ()
    assert len(transcript.messages) == 6
    assert [len(r) for r in transcript.requests()] == [1, 3, 5]


def test_items_codex_never_sends_are_left_out(tmp_path: Path) -> None:
    """Codex sends no ``system`` message and no ghost snapshot (its ``is_api_message``)."""
    lines = [
        cx.session_meta(0),
        cx.item({"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}}, 0.5),
        cx.message("system", "internal", 0.6),
        cx.message("user", "Hi.", 1),
        cx.message("assistant", "Hello.", 2),
    ]
    (transcript,) = load(tmp_path, lines)
    assert [m["role"] for m in transcript.messages] == ["user", "assistant"]
    assert transcript.notes == ("left out 2 items Codex does not send (ghost_snapshot, system)",)


def test_a_compacted_line_without_history_restarts_from_its_summary(tmp_path: Path) -> None:
    """Codex before replacement_history rebuilt the history from the summary; the replay
    starts from the summary alone and says so."""
    lines = [
        cx.session_meta(0),
        cx.message("user", "Hi.", 1),
        cx.message("assistant", "Hello.", 2),
        cx.line("compacted", {"message": "The user said hi."}, 3),
        cx.message("assistant", "Go on?", 4),
    ]
    _, second = load(tmp_path, lines)
    assert second.messages[0] == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "The user said hi."}],
    }
    assert second.restored == 1 and second.request_count == 1
    assert "no replacement_history" in second.notes[0]


def test_a_last_line_cut_short_is_skipped_with_a_note(tmp_path: Path) -> None:
    path = cx.write(tmp_path / "r.jsonl", cx.rollout()[:13], final_newline=False)
    with path.open("a", encoding="utf-8") as out:
        out.write('\n{"timestamp": "2026-06-18T00:59:00.000Z", "type": "respo')
    (transcript,) = load_transcripts(path)
    assert transcript.request_count == 1
    assert transcript.notes == ("line 14 is cut short (not JSON): left out",)


def test_turns_start_after_the_restored_history() -> None:
    """A history that opens with items the model wrote earlier (a compaction item) has no
    request inside them."""
    items = [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "compaction", "encrypted_content": "x"},
        {"type": "reasoning", "summary": []},
        {"type": "message", "role": "assistant", "content": "ok"},
    ]
    restored = Transcript("t", "codex", "responses", items, restored=2)
    assert [len(r) for r in restored.requests()] == [2]
    assert [len(r) for r in Transcript("t", "json", "responses", items).requests()] == [1]


def test_a_rollout_that_opens_compacted_keeps_its_notes(tmp_path: Path) -> None:
    lines = [
        cx.session_meta(0),
        cx.item({"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}}, 0.5),
        cx.compacted([cx.payload(cx.message("user", "Go on.", 0))], 1),
        cx.message("assistant", "Going on.", 2),
    ]
    (transcript,) = load(tmp_path, lines)
    assert transcript.name == "rollout.jsonl#1"
    assert transcript.notes == (
        "restarted from the compacted history on line 3 (1 item)",
        "left out 1 item Codex does not send (ghost_snapshot)",
    )
