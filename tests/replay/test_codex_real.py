"""Every recorded Codex CLI rollout replays as many requests as it shows model calls.

A model call is counted from the rollout's events, not from the splitting into turns: a
``token_count`` event whose totals changed ends one; a call with no such event is one the
user interrupted (the model's items, then ``turn_aborted``) or the recording cut (the
model's items at the end of the file).

Reads ../shared/data/trajectories/codex when it is beside the checkout (it is in CI); the
sessions are data, never copied into the repository.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from locations import TRAJECTORIES

from middleware.replay.transcripts import load_transcripts

FOLDER = TRAJECTORIES / "codex"
ROLLOUTS = sorted(FOLDER.glob("*.jsonl")) if FOLDER.is_dir() else []

if not ROLLOUTS:  # pragma: no cover - CI always has the shared data
    pytest.skip(
        "../shared/data/trajectories/codex is not beside the checkout", allow_module_level=True
    )

#: What the model writes, as Codex records it.
MODEL_ITEMS = frozenset(
    {"reasoning", "function_call", "custom_tool_call", "web_search_call", "tool_search_call"}
)


def is_model_item(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    return kind in MODEL_ITEMS or (kind == "message" and item.get("role") == "assistant")


def recorded_model_calls(path: Path) -> int:
    calls, pending, totals = 0, False, None
    for text in path.read_text(encoding="utf-8").splitlines():
        line = json.loads(text)
        payload = line.get("payload") or {}
        if line["type"] == "response_item" and is_model_item(payload):
            pending = True
        elif line["type"] == "event_msg" and payload.get("type") == "token_count":
            info = payload.get("info")
            now = json.dumps(info["total_token_usage"], sort_keys=True) if info else totals
            if now != totals:
                calls, pending, totals = calls + 1, False, now
        elif line["type"] == "event_msg" and payload.get("type") == "turn_aborted" and pending:
            calls, pending = calls + 1, False
    return calls + pending


@pytest.mark.parametrize("path", ROLLOUTS, ids=lambda p: p.name[:13])
def test_a_rollout_replays_its_model_calls(path: Path) -> None:
    transcripts = load_transcripts(path)
    assert {t.source for t in transcripts} == {"codex"}
    requests = sum(t.request_count for t in transcripts)
    assert requests > 0
    assert requests == recorded_model_calls(path)
    # Every request is timed, and no segment but the first opens without its restored
    # history (a compaction).
    assert all(t is not None for s in transcripts for t in s.request_times())
    assert all(s.restored > 0 for s in transcripts[1:])
