"""OpenAI Chat Completions' pairing rules, read from the wire messages themselves (no code
shared with the repair, which they check: they are its oracle), each with a reason
worded as the API's own 400."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from middleware.formats.declarations import Violation, blank_name, empty_name_reason


def violations(messages: Sequence[dict[str, Any]]) -> list[Violation]:
    out: list[Violation] = []
    i = 0
    last_calls: set[str] = set()  # calls of the latest assistant message, for "displaced"
    while i < len(messages):
        message = messages[i]
        role = message.get("role")
        if role == "tool":
            uid = message.get("tool_call_id") or ""
            code = "displaced_result" if uid and uid in last_calls else "orphan_result"
            out.append(
                Violation(
                    i,
                    code,
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                )
            )
            i += 1
            continue
        calls = message.get("tool_calls") if role == "assistant" else None
        if role == "assistant":
            last_calls = set()
        if not isinstance(calls, list) or not calls:
            i += 1
            continue
        for k, call in enumerate(calls):
            body = call.get(call.get("type") or "function") if isinstance(call, dict) else None
            if isinstance(body, dict) and blank_name(body.get("name")):
                out.append(
                    Violation(i, "empty_name", empty_name_reason(f"messages[{i}].tool_calls[{k}]"))
                )
        ids = [c.get("id") or "" if isinstance(c, dict) else "" for c in calls]
        last_calls = set(ids)
        seen: set[str] = set()
        for uid in ids:
            if not uid:
                out.append(Violation(i, "empty_id", "'tool_calls' has an entry with an empty 'id'"))
            elif uid in seen:
                out.append(
                    Violation(
                        i, "duplicate_id", f"Duplicate 'tool_call_id' of '{uid}' in 'tool_calls'."
                    )
                )
            seen.add(uid)
        answered: set[str] = set()
        j = i + 1
        while j < len(messages) and messages[j].get("role") == "tool":
            uid = messages[j].get("tool_call_id") or ""
            if uid not in seen or not uid:
                out.append(
                    Violation(
                        j,
                        "orphan_result",
                        f"Invalid parameter: 'tool_call_id' of '{uid}' not found in 'tool_calls' "
                        "of previous message.",
                    )
                )
            elif uid in answered:
                out.append(
                    Violation(j, "duplicate_result", f"More than one tool message for '{uid}'.")
                )
            answered.add(uid)
            j += 1
        missing = [uid for uid in ids if not uid or uid not in answered]
        if missing:
            out.append(
                Violation(
                    i,
                    "missing_result",
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                    f"response messages: {', '.join(missing)}",
                )
            )
        i = j
    return sorted(out, key=lambda v: v.index)
