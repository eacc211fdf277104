"""Anthropic's tool-id rule and its pairing rules, read from the wire messages themselves
(no code shared with the repair, which they check: they are its oracle), each with a
reason worded as the API's own 400."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from middleware.formats.declarations import Violation, blank_name

#: Tool ids the Anthropic API accepts: this pattern, at most :data:`MAX_ID_LENGTH`
#: characters (ids replayed from other providers, such as ``call_1|fc_2``, break it).
ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")
MAX_ID_LENGTH = 64


def valid_id(value: object) -> bool:
    """Whether the Anthropic API accepts ``value`` as a ``tool_use`` id."""
    return isinstance(value, str) and len(value) <= MAX_ID_LENGTH and bool(ID_PATTERN.match(value))


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict)]


def violations(messages: Sequence[dict[str, Any]]) -> list[Violation]:
    out: list[Violation] = []
    seen_ids: set[str] = set()
    assistants: list[int] = []  # indices of the assistant messages so far
    for i, message in enumerate(messages):
        blocks = _blocks(message)
        if message.get("role") == "assistant":
            assistants.append(i)
            for k, block in enumerate(blocks):
                if block.get("type") != "tool_use":
                    continue
                if blank_name(block.get("name")):
                    out.append(
                        Violation(
                            i,
                            "empty_name",
                            f"messages.{i}.content.{k}.tool_use.name: String should have at "
                            "least 1 non-blank character",
                        )
                    )
                uid = block.get("id") or ""
                if not uid:
                    out.append(
                        Violation(
                            i, "empty_id", f"messages.{i}.content.{k}: `tool_use` id is empty"
                        )
                    )
                elif uid in seen_ids:
                    out.append(
                        Violation(
                            i,
                            "duplicate_id",
                            f"messages.{i}.content.{k}: `tool_use` ids must be unique",
                        )
                    )
                elif not valid_id(uid):
                    out.append(
                        Violation(
                            i,
                            "invalid_id",
                            f"messages.{i}.content.{k}.tool_use.id: String should match pattern "
                            f"'{ID_PATTERN.pattern}' (at most {MAX_ID_LENGTH} characters)",
                        )
                    )
                seen_ids.add(uid)
            out.extend(_answered(messages, i, blocks))
        else:
            # The latest assistant message before the one right before this message.
            older = [a for a in assistants[-2:] if a <= i - 2]
            out.extend(_results(messages, i, blocks, older[-1] if older else None))
    return sorted(out, key=lambda v: v.index)


def _answered(
    messages: Sequence[dict[str, Any]], i: int, blocks: list[dict[str, Any]]
) -> list[Violation]:
    wanted = [b.get("id") or "" for b in blocks if b.get("type") == "tool_use"]
    if not wanted:
        return []
    answered: set[str] = set()
    if i + 1 < len(messages) and messages[i + 1].get("role") == "user":
        for block in _blocks(messages[i + 1]):
            if block.get("type") == "tool_result":
                answered.add(block.get("tool_use_id") or "")
    missing = [w for w in wanted if not w or w not in answered]
    if not missing:
        return []
    return [
        Violation(
            i,
            "missing_result",
            f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
            f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
            "`tool_result` block in the next message.",
        )
    ]


def _results(
    messages: Sequence[dict[str, Any]], j: int, blocks: list[dict[str, Any]], older: int | None
) -> list[Violation]:
    """The results of message ``j``; ``older`` is the latest assistant message before
    message ``j - 1`` (a result answering it is displaced rather than orphaned)."""
    out: list[Violation] = []
    previous = messages[j - 1] if j > 0 else None
    calls: set[str] = set()
    if previous is not None and previous.get("role") == "assistant":
        calls = _tool_use_ids(previous)
    earlier = _tool_use_ids(messages[older]) if older is not None else set()
    seen: set[str] = set()
    other_before = False
    for k, block in enumerate(blocks):
        if block.get("type") != "tool_result":
            other_before = True
            continue
        where = f"messages.{j}.content.{k}"
        uid = block.get("tool_use_id") or ""
        if not uid:
            out.append(
                Violation(j, "empty_id", f"{where}: `tool_result` has an empty `tool_use_id`")
            )
        elif uid not in calls:
            code = "displaced_result" if uid in earlier else "orphan_result"
            out.append(
                Violation(
                    j,
                    code,
                    f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {uid}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the "
                    "previous message.",
                )
            )
        elif uid in seen:
            out.append(
                Violation(j, "duplicate_result", f"{where}: more than one `tool_result` for {uid}")
            )
        elif other_before:
            out.append(
                Violation(
                    j,
                    "result_not_first",
                    f"{where}: `tool_result` blocks must come first in the user message, "
                    "before any other content",
                )
            )
        seen.add(uid)
    return out


def _tool_use_ids(message: dict[str, Any]) -> set[str]:
    return {b.get("id") or "" for b in _blocks(message) if b.get("type") == "tool_use"}
