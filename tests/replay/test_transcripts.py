"""Transcript loaders, on small fixtures of each format built here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware.replay.transcripts import load_transcripts


def write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text("\n".join(json.dumps(line) for line in data) + "\n", encoding="utf-8")
    else:
        path.write_text(json.dumps(data), encoding="utf-8")
    return path


def cc_line(kind: str, content: Any, msg_id: str | None = None, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    if msg_id is not None:
        message.update(id=msg_id, type="message", model="claude-x")
    return {"type": kind, "isSidechain": False, "message": message, **extra}


def test_claude_code_lines_group_by_message_id_and_restart_at_compaction(tmp_path: Path) -> None:
    lines = [
        {"type": "file-history-snapshot", "snapshot": {}},
        cc_line("user", "Fix the test."),
        cc_line("assistant", [{"type": "thinking", "thinking": "t", "signature": "s"}], "msg_1"),
        cc_line(
            "assistant", [{"type": "tool_use", "id": "tu_1", "name": "Read", "input": {}}], "msg_1"
        ),
        cc_line(
            "assistant", [{"type": "tool_use", "id": "tu_2", "name": "Grep", "input": {}}], "msg_1"
        ),
        {"type": "progress", "data": {}},
        cc_line("user", [{"type": "tool_result", "tool_use_id": "tu_1", "content": "a"}]),
        cc_line("user", [{"type": "tool_result", "tool_use_id": "tu_2", "content": "b"}]),
        {
            **cc_line("assistant", [{"type": "text", "text": "side"}], "msg_side"),
            "isSidechain": True,
        },
        cc_line("assistant", [{"type": "text", "text": "Done."}], "msg_2"),
        {"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted"},
        cc_line("user", "Summary of the conversation so far.", isCompactSummary=True),
        cc_line("assistant", [{"type": "text", "text": "Continuing."}], "msg_3"),
    ]
    first, second = load_transcripts(write(tmp_path, "s.jsonl", lines))
    assert first.format == "anthropic" and first.source == "claude-code"
    assert [m["role"] for m in first.messages] == ["user", "assistant", "user", "assistant"]
    assert [b["type"] for b in first.messages[1]["content"]] == ["thinking", "tool_use", "tool_use"]
    assert [b["tool_use_id"] for b in first.messages[2]["content"]] == ["tu_1", "tu_2"]
    assert [len(r) for r in first.requests()] == [1, 3]
    assert second.notes == ("restarted at the compaction boundary on line 11",)
    assert second.messages[0]["content"][0]["text"].startswith("Summary")
    assert middleware.check_history(first.messages, "anthropic") == []


def test_claude_code_timestamps_time_each_request(tmp_path: Path) -> None:
    def at(line: dict[str, Any], stamp: str | None) -> dict[str, Any]:
        return {**line, "timestamp": stamp} if stamp else line

    use = [{"type": "tool_use", "id": "tu_1", "name": "Bash", "input": {}}]
    lines = [
        at(cc_line("user", "Go."), "2026-02-12T14:00:00.000Z"),
        at(cc_line("assistant", use, "msg_1"), "2026-02-12T14:00:05.500Z"),
        at(
            cc_line("user", [{"type": "tool_result", "tool_use_id": "tu_1", "content": "x"}]),
            "2026-02-12T14:00:06Z",
        ),
        at(
            cc_line("assistant", [{"type": "text", "text": "Paused."}], "msg_2"),
            "2026-02-12T14:20:05.500Z",
        ),
        cc_line("user", "Again?"),
        at(cc_line("assistant", [{"type": "text", "text": "Yes."}], "msg_3"), "not a time"),
    ]
    (transcript,) = load_transcripts(write(tmp_path, "s.jsonl", lines))
    first, second, third = transcript.request_times()
    assert second is not None and first is not None and second - first == 1200.0
    assert third is None  # an unreadable time is unknown
    plain = [cc_line("user", "Go."), cc_line("assistant", [{"type": "text", "text": "k"}], "m")]
    (untimed,) = load_transcripts(write(tmp_path, "t.jsonl", plain))
    assert untimed.message_times == () and untimed.request_times() == [None]


def test_tau_bench_file_holds_many_openai_transcripts(tmp_path: Path) -> None:
    traj = [
        {"role": "system", "content": "You are an airline agent."},
        {"role": "user", "content": "Cancel my flight."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_reservation", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_reservation", "content": "{}"},
        {"role": "assistant", "content": "Done."},
    ]  # fmt: skip
    data = [{"task_id": i, "reward": 1.0, "info": {}, "traj": traj, "trial": 0} for i in range(3)]
    loaded = load_transcripts(write(tmp_path, "gpt-4o-airline.json", data))
    assert [t.name for t in loaded] == [f"gpt-4o-airline.json#{i}" for i in range(3)]
    assert {t.format for t in loaded} == {"openai"}
    assert [len(r) for r in loaded[0].requests()] == [2, 4]


def test_swe_agent_function_calling_and_text_mode(tmp_path: Path) -> None:
    fc = {"history": [
        {"role": "system", "content": "setting", "agent": "main"},
        {"role": "user", "content": "issue", "agent": "main"},
        {"role": "assistant", "content": "look", "agent": "main", "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "content": "out", "agent": "main", "tool_call_ids": ["call_a"]},
    ], "trajectory": [], "info": {}}  # fmt: skip
    (fc_t,) = load_transcripts(write(tmp_path, "a.traj", fc))
    assert fc_t.messages[3]["tool_call_id"] == "call_a" and "tool_call_ids" not in fc_t.messages[3]
    assert fc_t.policy_overrides == {}
    assert middleware.check_history(fc_t.messages, "openai") == []

    footer = "\n(Open file: n/a)\n(Current directory: /repo)\nbash-$"
    text = {
        "history": [
            {"role": "system", "content": "setting"},
            {"role": "user", "content": "issue"},
            {"role": "assistant", "content": "List.\n```\nls\n```", "action": "ls\n"},
            {"role": "user", "content": "a.py" + footer},
            {"role": "assistant", "content": "Read.\n```\nopen a.py\n```", "action": "open a.py\n"},
            {"role": "user", "content": "1:print()" + footer},
        ]
    }
    (text_t,) = load_transcripts(write(tmp_path, "b.traj", text))
    assert text_t.policy_overrides == {}  # the default policy recognises it
    report = default_report(text_t.messages)
    assert report.text_protocol is not None and report.text_protocol.startswith("recognised SWE")


def default_report(messages: list[Any]) -> middleware.Report:
    with middleware.Pipeline.from_policy(None) as pipe:
        return pipe.process(messages).report


def test_mini_swe_agent_is_a_text_protocol_transcript(tmp_path: Path) -> None:
    data = {
        "trajectory_format": "mini-swe-agent-1",
        "instance_id": "x",
        "info": {},
        "messages": [
            {"role": "system", "content": "You run bash."},
            {"role": "user", "content": "Fix it."},
            {"role": "assistant", "content": "THOUGHT: list.\n```bash\nls\n```", "extra": {}},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
            {"role": "assistant", "content": "THOUGHT: read.\n```bash\ncat a.py\n```", "extra": {}},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\npass\n</output>"},
            {"role": "assistant", "content": "THOUGHT: done.\n```bash\nsubmit\n```", "extra": {}},
        ],
    }
    (t,) = load_transcripts(write(tmp_path, "x.traj.json", data))
    assert t.source == "mini-swe-agent" and t.policy_overrides == {}
    assert t.request_count == 3
    report = default_report(t.messages)
    assert report.text_protocol == "recognised mini-swe-agent (<returncode> observations)"
    assert report.tool_results == 2


@pytest.mark.parametrize(
    ("data", "fmt"),
    [
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
         "openai"),
        ({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "x", "content": "y"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}]}, "anthropic"),
        ({"model": "m", "input": [{"type": "function_call_output", "call_id": "c", "output": "o"},
                                  {"type": "message", "role": "assistant", "content": "ok"}]},
         "responses"),
    ],
)  # fmt: skip
def test_plain_lists_and_request_bodies(tmp_path: Path, data: Any, fmt: str) -> None:
    (t,) = load_transcripts(write(tmp_path, "h.json", data))
    assert (t.source, t.format) == ("json", fmt)


def test_responses_turns_of_several_items_are_one_request(tmp_path: Path) -> None:
    items = [
        {"role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "o"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "ok"}],
        },
    ]
    (t,) = load_transcripts(write(tmp_path, "r.json", items))
    assert [len(r) for r in t.requests()] == [1, 4]


def test_unreadable_files_are_history_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(middleware.HistoryError, match="not JSON"):
        load_transcripts(bad)
    with pytest.raises(middleware.HistoryError, match="not a transcript"):
        load_transcripts(write(tmp_path, "n.json", 42))


def test_streamed_lines_interleaved_with_early_results_form_one_message(tmp_path: Path) -> None:
    tool_use = lambda i: {"type": "tool_use", "id": i, "name": "Bash", "input": {}}  # noqa: E731
    result = lambda i: [{"type": "tool_result", "tool_use_id": i, "content": i}]  # noqa: E731
    lines = [
        cc_line("user", "Run both."),
        cc_line("assistant", [tool_use("a")], "msg_1"),
        cc_line("user", result("a")),  # the first tool finished while the response streamed
        cc_line("assistant", [tool_use("b")], "msg_1"),
        cc_line("user", result("b")),
        cc_line("assistant", [{"type": "text", "text": "Both ran."}], "msg_2"),
    ]
    (t,) = load_transcripts(write(tmp_path, "s.jsonl", lines))
    assert [m["role"] for m in t.messages] == ["user", "assistant", "user", "assistant"]
    assert [b["id"] for b in t.messages[1]["content"]] == ["a", "b"]
    assert [b["tool_use_id"] for b in t.messages[2]["content"]] == ["a", "b"]
    assert middleware.check_history(t.messages, "anthropic") == []


def test_one_swe_agent_observation_answering_two_calls(tmp_path: Path) -> None:
    data = {
        "history": [
            {"role": "user", "content": "issue"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": "bash", "arguments": "{}"}}
                    for i in ("c1", "c2")
                ],
            },
            {"role": "tool", "content": "out", "tool_call_ids": ["c1", "c2"]},
        ]
    }
    (t,) = load_transcripts(write(tmp_path, "m.traj", data))
    assert [m.get("tool_call_id") for m in t.messages[2:]] == ["c1", "c2"]
    assert middleware.check_history(t.messages, "openai") == []
