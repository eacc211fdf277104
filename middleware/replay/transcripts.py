"""Read recorded agent sessions into the histories the agent sent, one request at a time.

Supported (:data:`READS`): Claude Code session JSONL and Codex CLI rollout JSONL (read by
:mod:`.session_logs`), OpenAI chat message lists (including tau-bench's file of
trajectories), SWE-agent ``.traj``, mini-swe-agent ``.traj.json`` (text protocol,
recognised by the default policy), and plain JSON message lists or request bodies. The
format is read from the content, never from the file's name. Request *k* of a transcript
is the history before its *k*-th model turn (a run of the model's messages or items).

A file that is none of these, or one with no model call, is refused with a
:class:`~middleware.errors.TranscriptError` that says what was found and names what is
read: never replayed as no request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from middleware.errors import HistoryError, TranscriptError
from middleware.formats import detect_format, get_codec
from middleware.formats.bodies import HISTORY_KEYS
from middleware.replay.session_logs import (
    Segment,
    claude_code_segments,
    is_claude_code_line,
    is_rollout_line,
    rollout_segments,
)

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
    #: Where it came from: claude-code, codex, tau-bench, swe-agent, mini-swe-agent, json.
    source: str
    format: str
    messages: list[Any]
    #: Policy overrides the transcript needs (none of the sources read here needs one:
    #: the text agents among them are recognised by the default policy).
    policy_overrides: Mapping[str, Any] = field(default_factory=dict)
    #: What the loader did that a reader should know (compaction restarts, skipped lines).
    notes: tuple[str, ...] = ()
    #: When each message was written, in seconds (``None``: not recorded), where the
    #: transcript says (Claude Code's and Codex's timestamps); empty when it never does.
    message_times: tuple[float | None, ...] = ()
    #: How many leading messages a compaction restored (Codex's replacement history, which
    #: may end with the model's compaction item): the first request's history, with no
    #: model turn of this transcript among them.
    restored: int = 0

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
        for i, message in enumerate(self.messages[self.restored :], start=self.restored):
            assistant = isinstance(message, dict) and codec.read_message(message, i).role == (
                "assistant")  # fmt: skip
            if assistant and not previous_assistant:
                starts.append(i)
            previous_assistant = assistant
        return tuple(starts)

    @property
    def request_count(self) -> int:
        return sum(1 for _ in self.requests())


#: What :func:`load_transcripts` reads, in the words its refusals use.
READS = (
    "Claude Code session JSONL, Codex CLI rollout JSONL, an OpenAI chat message list (or "
    "a message list of another wire format), tau-bench's list of trajectories, SWE-agent "
    ".traj, mini-swe-agent .traj.json, or a request body holding its history"
)
#: How the files of a folder that may hold transcripts are named.
SUFFIXES = (".jsonl", ".json", ".traj")
#: What each source is, for the refusal of one with no model call.
_SOURCES = {"claude-code": "a Claude Code session", "codex": "a Codex CLI rollout",
            "swe-agent": "a SWE-agent trajectory", "mini-swe-agent": "a mini-swe-agent trajectory",
            "tau-bench": "a tau-bench trajectory list", "json": "a JSON message list"}  # fmt: skip


def load_transcripts(path: str | Path, name: str | None = None) -> list[Transcript]:
    """Every conversation in ``path`` (a file may hold several: tau-bench, compactions),
    named after ``name`` (the file's name by default). The format is read from the
    content, whatever the file's name; a file that is none of :data:`READS`, or holds no
    model call, raises :class:`TranscriptError`."""
    file = Path(path)
    label = name or file.name
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TranscriptError(str(file), f"not UTF-8 text ({exc.reason} at byte {exc.start})"
                              f"{_NOT_READ}") from exc  # fmt: skip
    lines, data = json_lines(str(file), text)
    try:
        found = (
            _from_lines(str(file), label, lines)
            if lines is not None
            else _from_json(str(file), label, data)
        )
        calls = sum(t.request_count for t in found)
    except TranscriptError:
        raise
    except HistoryError as exc:  # a message no wire format reads, formats mixed
        raise TranscriptError(str(file), str(exc)) from exc
    if not calls:
        what = _SOURCES.get(found[0].source, "a transcript") if found else "a file"
        raise TranscriptError(str(file), f"{what} with no model call (no assistant message "
                              "or item): nothing to replay")  # fmt: skip
    return found


_NOT_READ = f": not a transcript this tool reads, which are {READS}"


def transcript_files(folder: Path) -> list[Path]:
    """The files under ``folder`` named as transcripts are (:data:`SUFFIXES`), in the
    order of their paths."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))


def read_transcripts(paths: Sequence[str | Path]) -> tuple[list[Transcript], dict[str, str]]:
    """The transcripts of each path, a file or a folder, and the files of a folder that
    held none, with why (``chatcli-mw simulate``'s reading).

    A file given that is no transcript raises its :class:`TranscriptError`; in a
    folder, such a file is skipped and named (a folder of sessions holds other files:
    metadata, reports), and only a folder none of whose files is one raises. A folder's
    transcripts are named by their path under it."""
    transcripts: list[Transcript] = []
    skipped: dict[str, str] = {}
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            transcripts += load_transcripts(path)
            continue
        files = transcript_files(path)
        found: list[Transcript] = []
        left: dict[str, str] = {}
        for file in files:
            try:
                found += load_transcripts(file, name=file.relative_to(path).as_posix())
            except TranscriptError as exc:
                left[str(file)] = exc.reason
        if not found:
            named = ", ".join("*" + suffix for suffix in SUFFIXES)
            first = "".join(f"; {file}: {reason}" for file, reason in list(left.items())[:1])
            raise TranscriptError(str(path), f"no transcript among its {len(files)} files "
                                  f"named {named}{first}")  # fmt: skip
        transcripts += found
        skipped.update(left)
    return transcripts, skipped


def json_lines(file: str, text: str) -> tuple[list[tuple[int, dict[str, Any]]] | None, Any]:
    """``(lines, None)``: the JSON objects of a JSONL text with their line numbers (a
    last line cut short, as by a recorder that copied the file while it was written,
    is left out); ``(None, data)``: the text is one JSON value."""
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    first: Any = None
    if numbered:
        try:
            first = json.loads(numbered[0][1])
        except json.JSONDecodeError:
            first = None
    if not isinstance(first, dict) or (len(numbered) == 1 and not _session_line(first)):
        if len(numbered) == 1 and first is not None:
            return None, first
        try:
            return None, json.loads(text)
        except json.JSONDecodeError as exc:
            raise TranscriptError(file, f"not JSON ({exc.msg} at line {exc.lineno})"
                                  f"{_NOT_READ}") from exc  # fmt: skip
    lines: list[tuple[int, dict[str, Any]]] = [(numbered[0][0], first)]
    for number, line in numbered[1:]:
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == numbered[-1][0]:
                lines.append((number, {"type": CUT_SHORT}))
                break
            raise TranscriptError(file, f"line {number} is not JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise TranscriptError(file, f"line {number} is not a JSON object")
        lines.append((number, record))
    return lines, None


#: The type given to a last line cut short (no loader reads it; its note says so).
CUT_SHORT = "<cut short>"


def _session_line(record: dict[str, Any]) -> bool:
    return is_rollout_line(record) or is_claude_code_line(record)


def _from_lines(file: str, label: str, lines: list[tuple[int, dict[str, Any]]]) -> list[Transcript]:
    """A Claude Code session or a Codex rollout, whichever its first known line is."""
    first = next((record for _, record in lines if _session_line(record)), None)
    if first is None:
        types = sorted({str(r["type"]) for _, r in lines if "type" in r and r["type"] != CUT_SHORT})
        seen = f"line types {', '.join(types)}" if types else "no line has a type"
        raise TranscriptError(file, "JSON lines that are neither Claude Code session lines "
                              f"with a user or assistant message nor Codex rollout lines "
                              f"({seen}){_NOT_READ}")  # fmt: skip
    cut = [f"line {n} is cut short (not JSON): left out" for n, r in lines
           if r.get("type") == CUT_SHORT]  # fmt: skip
    if is_rollout_line(first):
        return _transcripts(label, "codex", "responses", rollout_segments(lines), cut)
    return _transcripts(label, "claude-code", "anthropic", claude_code_segments(lines), cut)


def _transcripts(
    label: str, source: str, format: str, segments: list[Segment], notes: list[str]
) -> list[Transcript]:
    """One transcript per segment that holds messages, ``label#k`` when there are several;
    ``notes`` (the file's) and those of an empty segment go to the next one."""
    out: list[Transcript] = []
    pending = list(notes)
    for k, segment in enumerate(segments):
        if not segment.items:
            pending += segment.notes
            continue
        name = label if len(segments) == 1 else f"{label}#{k}"
        times = tuple(_seconds(stamp) for stamp in segment.stamps)
        recorded = times if any(t is not None for t in times) else ()
        said = (*segment.notes, *pending)
        out.append(Transcript(name, source, format, segment.items, {}, said, recorded,
                              segment.restored))  # fmt: skip
        pending = []
    return out


def _from_json(file: str, label: str, data: Any) -> list[Transcript]:
    """The JSON formats: a trajectory, a list of trajectories, a body or a message list."""
    if isinstance(data, dict) and isinstance(data.get("history"), list):
        return [_swe_agent(label, _messages(file, data["history"]))]
    if isinstance(data, dict) and str(data.get("trajectory_format", "")).startswith(
        "mini-swe-agent"
    ):
        return [_plain(label, "mini-swe-agent", _messages(file, data.get("messages")), {})]
    if isinstance(data, list) and data and isinstance(data[0], dict) and "traj" in data[0]:
        return [
            _plain(f"{label}#{i}", "tau-bench", item["traj"], {})
            for i, item in enumerate(data)
            if isinstance(item, dict) and isinstance(item.get("traj"), list)
        ]
    if isinstance(data, dict):  # a request body: its history field
        found = next((data[key] for key in HISTORY_KEYS if isinstance(data.get(key), list)), None)
        if found is None:
            keys = ", ".join(HISTORY_KEYS)
            raise TranscriptError(file, f"a JSON object with no history (no list under "
                                  f"{keys}){_NOT_READ}")  # fmt: skip
        return [_plain(label, "json", _messages(file, found), {})]
    if isinstance(data, list):
        return [_plain(label, "json", _messages(file, data), {})]
    raise TranscriptError(file, f"a JSON {type(data).__name__}{_NOT_READ}")


def _messages(file: str, data: Any) -> list[Any]:
    """``data`` if it is a list of messages (objects with a role or a type)."""
    if not isinstance(data, list) or not data:
        raise TranscriptError(file, f"a JSON list with no message{_NOT_READ}")
    for i, item in enumerate(data):
        if not (isinstance(item, dict) and ("role" in item or "type" in item)):
            raise TranscriptError(file, f"item {i} is not a message (an object with a "
                                  f"'role' or a 'type'){_NOT_READ}")  # fmt: skip
    return data


def _plain(name: str, source: str, messages: list[Any], overrides: Mapping[str, Any]) -> Transcript:
    return Transcript(name, source, detect_format(messages).format, messages, overrides)


def _swe_agent(label: str, history: list[dict[str, Any]]) -> Transcript:
    """SWE-agent keeps the model's view in ``history``; function-calling runs answer calls
    with ``role: tool`` messages carrying a list ``tool_call_ids``. Text-mode runs need no
    override: the default policy recognises their observations."""
    messages: list[Any] = []
    for entry in history:
        message = {k: v for k, v in entry.items() if k != "tool_call_ids"}
        if entry.get("role") == "tool":
            # One observation may answer several calls: one tool message per id.
            for call_id in entry.get("tool_call_ids") or [""]:
                messages.append({**message, "tool_call_id": call_id})
            continue
        messages.append(message)
    return Transcript(label, "swe-agent", "openai", messages)


def _seconds(stamp: Any) -> float | None:
    """An ISO 8601 timestamp (``2026-02-12T14:11:56.103Z``) in seconds, else ``None``."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
