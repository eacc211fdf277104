"""Read recorded agent sessions into the histories the agent sent, one request at a time.

Supported: Claude Code session JSONL, OpenAI chat message lists (including tau-bench's
file of trajectories), SWE-agent ``.traj``, mini-swe-agent ``.traj.json`` (text protocol,
recognised by the default policy),
and plain JSON message lists or request bodies. Request *k* of a transcript is the history
before its *k*-th assistant message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from middleware.errors import HistoryError
from middleware.formats import detect_format, get_codec
from middleware.formats.bodies import HISTORY_KEYS

#: The explicit settings that mark these agents' observations as tool output. The default
#: policy no longer needs them (``text_protocol.enabled: auto`` recognises both agents and
#: applies the same rules); they stay as the reference auto mode is tested against.
MINI_SWE_AGENT_RULE: Mapping[str, Any] = {
    "text_protocol.enabled": True,
    "text_protocol.pattern": r"^\s*<returncode>",
    "text_protocol.follows_assistant": True,
    "text_protocol.tool_name": "bash",
}
SWE_AGENT_TEXT_RULE: Mapping[str, Any] = {
    "text_protocol.enabled": True,
    "text_protocol.pattern": None,
    "text_protocol.follows_assistant": True,
    "text_protocol.tool_name": "swe_agent_action",
}


@dataclass(frozen=True)
class Transcript:
    """One recorded conversation, as the wire history of its last request."""

    name: str
    #: Where it came from: claude-code, openai, tau-bench, swe-agent, mini-swe-agent, json.
    source: str
    format: str
    messages: list[Any]
    #: Policy overrides the transcript needs (none of the sources read here needs one:
    #: the text agents among them are recognised by the default policy).
    policy_overrides: Mapping[str, Any] = field(default_factory=dict)
    #: What the loader did that a reader should know (compaction restarts, skipped lines).
    notes: tuple[str, ...] = ()
    #: When each message was written, in seconds (``None``: not recorded), where the
    #: transcript says (Claude Code's timestamps); empty when it never does.
    message_times: tuple[float | None, ...] = ()

    def requests(self) -> Iterator[list[Any]]:
        """The history the agent sent before each of its assistant turns (consecutive
        assistant items, as in the Responses format, are one turn)."""
        for i in self._turn_starts:
            yield self.messages[:i]

    def request_times(self) -> list[float | None]:
        """When each request was answered (the time of the assistant message that answered
        it), in the order of :meth:`requests`; all ``None`` without recorded times."""
        times = self.message_times
        return [times[i] if i < len(times) else None for i in self._turn_starts]

    @cached_property
    def _turn_starts(self) -> tuple[int, ...]:
        """Where each run of the model's messages begins (its format says which are; read
        once, as each of the methods above asks)."""
        codec = get_codec(self.format)
        starts: list[int] = []
        previous_assistant = False
        for i, message in enumerate(self.messages):
            assistant = isinstance(message, dict) and codec.read_message(message, i).role == (
                "assistant")  # fmt: skip
            if assistant and not previous_assistant:
                starts.append(i)
            previous_assistant = assistant
        return tuple(starts)

    @property
    def request_count(self) -> int:
        return sum(1 for _ in self.requests())


def load_transcripts(path: str | Path) -> list[Transcript]:
    """Every conversation in ``path`` (a file may hold several: tau-bench, compactions)."""
    file = Path(path)
    if file.name.endswith(".jsonl"):
        return _claude_code(file)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise HistoryError(f"{file}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    if isinstance(data, dict) and isinstance(data.get("history"), list):
        return [_swe_agent(file, data)]
    if isinstance(data, dict) and data.get("trajectory_format", "").startswith("mini-swe-agent"):
        return [_plain(file.name, "mini-swe-agent", data["messages"], {})]
    if isinstance(data, list) and data and isinstance(data[0], dict) and "traj" in data[0]:
        return [
            _plain(f"{file.name}#{i}", "tau-bench", item["traj"], {})
            for i, item in enumerate(data)
            if isinstance(item.get("traj"), list)
        ]
    if isinstance(data, dict):  # a request body: its history field
        found = next((data[key] for key in HISTORY_KEYS if isinstance(data.get(key), list)), None)
        if found is not None:
            return [_plain(file.name, "json", found, {})]
    if isinstance(data, list):
        return [_plain(file.name, "json", data, {})]
    raise HistoryError(f"{file}: not a transcript format this tool reads")


def _plain(name: str, source: str, messages: list[Any], overrides: Mapping[str, Any]) -> Transcript:
    return Transcript(name, source, detect_format(messages).format, messages, overrides)


def _swe_agent(file: Path, data: dict[str, Any]) -> Transcript:
    """SWE-agent keeps the model's view in ``history``; function-calling runs answer calls
    with ``role: tool`` messages carrying a list ``tool_call_ids``. Text-mode runs need no
    override: the default policy recognises their observations."""
    messages: list[Any] = []
    for entry in data["history"]:
        message = {k: v for k, v in entry.items() if k != "tool_call_ids"}
        if entry.get("role") == "tool":
            # One observation may answer several calls: one tool message per id.
            for call_id in entry.get("tool_call_ids") or [""]:
                messages.append({**message, "tool_call_id": call_id})
            continue
        messages.append(message)
    return Transcript(file.name, "swe-agent", "openai", messages)


def _claude_code(file: Path) -> list[Transcript]:
    """Claude Code writes one line per content block; lines of one API message share
    ``message.id``. Consecutive user lines form one user message, as on the wire. A
    compaction boundary starts a new conversation (the summary replaces the history)."""
    segments: list[list[dict[str, Any]]] = [[]]
    times: list[list[float | None]] = [[]]
    notes: list[list[str]] = [[]]
    sidechain_only = True
    lines = file.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    if any(r.get("type") in ("user", "assistant") and not r.get("isSidechain") for r in records):
        sidechain_only = False
    last_assistant: tuple[object, int] | None = None  # (message.id, index in segment)
    for number, record in enumerate(records, start=1):
        kind = record.get("type")
        if kind == "system" and record.get("subtype") == "compact_boundary":
            segments.append([])
            times.append([])
            notes.append([f"restarted at the compaction boundary on line {number}"])
            last_assistant = None
            continue
        if kind not in ("user", "assistant") or not isinstance(record.get("message"), dict):
            continue
        if record.get("isSidechain") and not sidechain_only:
            continue
        last_assistant = _append_block_line(segments[-1], record["message"], last_assistant)
        while len(times[-1]) < len(segments[-1]):  # a message begun on this line
            times[-1].append(_seconds(record.get("timestamp")))
    out = []
    for i, (messages, when, segment_notes) in enumerate(zip(segments, times, notes, strict=True)):
        if not messages:
            continue
        name = file.name if len(segments) == 1 else f"{file.name}#{i}"
        recorded = tuple(when) if any(t is not None for t in when) else ()
        out.append(Transcript(name, "claude-code", "anthropic", messages, {},
                              tuple(segment_notes), recorded))  # fmt: skip
    return out


def _seconds(stamp: Any) -> float | None:
    """An ISO 8601 timestamp (``2026-02-12T14:11:56.103Z``) in seconds, else ``None``."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _append_block_line(
    messages: list[dict[str, Any]],
    message: dict[str, Any],
    last_assistant: tuple[object, int] | None,
) -> tuple[object, int] | None:
    """Add one line's blocks. The lines of one API response share ``message.id`` and may be
    interleaved with the results of its first calls (tools start while the response still
    streams), so they go back into that assistant message. Returns the new
    ``(message.id, index)`` of the latest assistant message."""
    content = message.get("content")
    blocks = (
        [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    )
    if message.get("role") == "assistant":
        if last_assistant is not None and last_assistant[0] == message.get("id"):
            messages[last_assistant[1]]["content"].extend(blocks)
            return last_assistant
        messages.append({"role": "assistant", "content": blocks})
        return message.get("id"), len(messages) - 1
    if messages and messages[-1]["role"] == "user":
        messages[-1]["content"].extend(blocks)
        # tool_result blocks come first in a user message, as Claude Code sends it.
        messages[-1]["content"].sort(key=lambda b: b.get("type") != "tool_result")
    else:
        messages.append({"role": "user", "content": blocks})
    return last_assistant
