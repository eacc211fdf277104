"""What ``chatcli-mw simulate`` reads: Codex rollouts, folders of sessions, and a clear
error (exit 2, one line) for a file that is no transcript it reads."""

from __future__ import annotations

import json
from pathlib import Path

import codex_rollout_builders as cx
import pytest

from middleware.cli import app


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = app.main(["simulate", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_codex_rollout_replays_its_model_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = cx.write(tmp_path / "019ed836.jsonl", cx.rollout())
    status, out, err = simulate(capsys, str(path), "--pricing", "openai-gpt-5")
    assert status == 0, err
    requests = sum(cx.ROLLOUT_REQUESTS)
    assert out.startswith(f"2 session(s), {requests} requests, pricing openai-gpt-5")
    number = next(i for i, line in enumerate(cx.rollout(), 1) if line["type"] == "compacted")
    assert f"note: 019ed836.jsonl#1: restarted from the compacted history on line {number}" in out


def test_a_folder_replays_the_sessions_under_it_and_names_what_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cx.write(tmp_path / "a.jsonl", cx.rollout())
    (tmp_path / "2026" / "06").mkdir(parents=True)
    cx.write(tmp_path / "2026" / "06" / "rollout-b.jsonl", cx.rollout())
    (tmp_path / "README.md").write_text("# sessions\n", encoding="utf-8")  # not a session's name
    (tmp_path / "metadata.json").write_text(json.dumps({"agent": "Codex"}), encoding="utf-8")
    status, out, err = simulate(capsys, str(tmp_path), "--json")
    assert status == 0, err
    data = json.loads(out)
    assert data["transcripts"] == [
        "2026/06/rollout-b.jsonl#0",
        "2026/06/rollout-b.jsonl#1",
        "a.jsonl#0",
        "a.jsonl#1",
    ]
    assert data["policies"][0]["requests"] == 2 * sum(cx.ROLLOUT_REQUESTS)
    ((skipped, reason),) = data["skipped"].items()
    assert skipped == str(tmp_path / "metadata.json") and "Codex CLI rollout JSONL" in reason
    status, out, _ = simulate(capsys, str(tmp_path))
    assert f"note: skipped {tmp_path / 'metadata.json'}: " in out


def test_a_file_that_is_no_transcript_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = cx.write(tmp_path / "a.jsonl", cx.rollout())
    bad = tmp_path / "events.jsonl"
    bad.write_text('{"event": "start"}\n', encoding="utf-8")
    status, out, err = simulate(capsys, str(good), str(bad))
    assert status == 2 and out == ""
    assert err.startswith(f"chatcli-mw: error: {bad}: ") and err.count("\n") == 1
    assert "Codex CLI rollout JSONL" in err and "Traceback" not in err


def test_a_folder_with_no_transcript_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "metadata.json").write_text("{}", encoding="utf-8")
    status, _, err = simulate(capsys, str(tmp_path))
    assert status == 2
    assert err.startswith(f"chatcli-mw: error: {tmp_path}: no transcript among") and (
        "metadata.json" in err
    )
