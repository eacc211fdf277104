"""The JSONL session logs agent CLIs write, read into the wire history of each request.

**Claude Code** (``~/.claude/projects/*/<session>.jsonl``) writes one line per content
block; the lines of one API message share ``message.id``, and consecutive user lines form
one user message, as on the wire. Its system prompt is not in the log. A
``compact_boundary`` line starts a new conversation (the summary replaces the history).

**Codex CLI** rollouts (``~/.codex/sessions/**/rollout-*.jsonl``) are read as the
Responses input items Codex sent. A rollout is one ``{timestamp, type, payload}`` object
per line, known by its line types (:data:`LINE_TYPES`), whatever the file's name. The
history of a request is the payloads of the ``response_item`` lines before it, in order
and as they are: messages, reasoning (with its encrypted content, or what a recorder left
of it), function, custom (apply_patch) and tool-search calls and their outputs, web
searches (run by the server: no output).

Lines of the other types are not history. ``session_meta`` describes the session (a
resumed session writes it again; nothing restarts): its ``base_instructions`` are the
request's ``instructions``, not its ``input``, so they are left out, as Claude Code's
system prompt is (the same prefix on every request, under every policy). ``turn_context``
holds a turn's settings, ``event_msg`` what the terminal showed (token counts, the user's
message again). A ``compacted`` line replaces the whole history with its
``replacement_history`` (the user's messages, the instructions Codex puts back, the
compaction item): the replay restarts from it, as at Claude Code's compaction boundary;
the items recorded after it are new, none repeats it.

Items Codex never sends (its ``is_api_message``: ``system`` messages, ghost snapshots,
compaction triggers) are left out, with a note. Outputs are taken as recorded (Codex cuts
one above its history limit, about 12,000 tokens, before sending it; the replay does not).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The line types of a rollout.
LINE_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
#: Item types recorded but never sent.
UNSENT = frozenset({"ghost_snapshot", "compaction_trigger"})


@dataclass
class Segment:
    """The messages of one stretch of a log between compactions, with the timestamp of the
    line each one began on (as written: the caller reads the times)."""

    items: list[dict[str, Any]] = field(default_factory=list)
    stamps: list[Any] = field(default_factory=list)
    #: How many leading items a compaction restored (none of them is a model call here).
    restored: int = 0
    notes: list[str] = field(default_factory=list)


#: One line of a log: its number in the file and its JSON object.
Line = tuple[int, Mapping[str, Any]]


def is_claude_code_line(record: Mapping[str, Any]) -> bool:
    """Whether a JSON line is a Claude Code message line (user or assistant)."""
    return record.get("type") in ("user", "assistant") and isinstance(record.get("message"), dict)


def claude_code_segments(lines: Sequence[Line]) -> list[Segment]:
    """The conversations of a Claude Code log: a compaction boundary starts the next.
    Sidechain lines (a subagent's, in the main log) are left out unless the log has
    nothing else (a subagent's own log)."""
    segments = [Segment()]
    sidechain_only = not any(
        is_claude_code_line(record) and not record.get("isSidechain") for _, record in lines
    )
    last_assistant: tuple[object, int] | None = None  # (message.id, index in segment)
    for number, record in lines:
        kind = record.get("type")
        if kind == "system" and record.get("subtype") == "compact_boundary":
            segments.append(
                Segment(notes=[f"restarted at the compaction boundary on line {number}"])
            )
            last_assistant = None
            continue
        if not is_claude_code_line(record) or (record.get("isSidechain") and not sidechain_only):
            continue
        segment = segments[-1]
        last_assistant = _append_block_line(segment.items, record["message"], last_assistant)
        while len(segment.stamps) < len(segment.items):  # a message begun on this line
            segment.stamps.append(record.get("timestamp"))
    return segments


def _append_block_line(
    messages: list[dict[str, Any]],
    message: Mapping[str, Any],
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


def is_rollout_line(record: Mapping[str, Any]) -> bool:
    """Whether a JSON line is one of a Codex rollout."""
    return record.get("type") in LINE_TYPES and isinstance(record.get("payload"), dict)


def rollout_segments(lines: Sequence[Line]) -> list[Segment]:
    """The segments of a rollout's lines (each with its line number, for the notes); the
    first segment may be empty (a rollout that opens compacted)."""
    segments = [Segment()]
    left_out: dict[str, int] = {}
    for number, record in lines:
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        kind = record.get("type")
        if kind == "response_item":
            unsent = _unsent(payload)
            if unsent is not None:
                left_out[unsent] = left_out.get(unsent, 0) + 1
                continue
            segments[-1].items.append(payload)
            segments[-1].stamps.append(record.get("timestamp"))
        elif kind == "compacted":
            segments.append(_restart(payload, record.get("timestamp"), number))
    if left_out:
        kinds = ", ".join(sorted(left_out))
        total = sum(left_out.values())
        segments[0].notes.append(
            f"left out {total} item{'s' * (total != 1)} Codex does not send ({kinds})"
        )
    return segments


def _unsent(item: Mapping[str, Any]) -> str | None:
    """What makes ``item`` one Codex never sends (its type, or ``system`` for a system
    message), else ``None``."""
    kind = item.get("type")
    if kind in UNSENT:
        return str(kind)
    if kind in (None, "message") and item.get("role") == "system":
        return "system"
    return None


def _restart(payload: Mapping[str, Any], stamp: Any, number: int) -> Segment:
    """The segment a ``compacted`` line on line ``number`` starts."""
    history = payload.get("replacement_history")
    if isinstance(history, list):
        items = [item for item in history if isinstance(item, dict) and _unsent(item) is None]
        count = f"{len(items)} item{'s' * (len(items) != 1)}"
        note = f"restarted from the compacted history on line {number} ({count})"
    else:
        # Codex before replacement_history rebuilt the history from the user's messages
        # and this summary; the replay keeps the summary alone.
        summary = str(payload.get("message") or "")
        items = [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": summary}],
            }
        ]
        note = (
            f"restarted at the compacted line {number}, which has no replacement_history: "
            "from its summary alone (Codex also kept the user's messages)"
        )
    return Segment(items, [stamp] * len(items), len(items), [note])
