"""What every request of one conversation repeats, read from a request body: the opening
a client that names no session is known by (:meth:`.Codec.opening`, digested by
:mod:`middleware.conversations.keys`).

The formats whose history is a list of role messages (Anthropic ``messages``, Chat
Completions ``messages``, Responses ``input``) share one reading, :func:`message_opening`:
the system prompt (Anthropic ``system``, Responses ``instructions``, or the first system
or developer message), the first user message and, once there is one, the model's first
reply (its tool-call ids, or its text). Markers that clients move from turn to turn
(``cache_control``, a Responses item's ``id`` and ``status``) are left out by
:func:`normal`, so a conversation keeps its key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Keys dropped wherever they appear in an opening: markers a client moves or renumbers
#: between the requests of one conversation.
MOVED_MARKERS = frozenset({"cache_control", "id", "status"})
#: The key of an opening that is a conversation's first reply's call ids alone
#: (``{"calls": ...}``), not what it opened with.
CALL_IDS = "calls"

_SYSTEM_ROLES = ("system", "developer")
_USER_TYPES = (None, "message")


def message_opening(body: Mapping[str, Any], fmt: str | None) -> Any:
    """The opening of a role-message history, as it is digested: in format ``fmt`` (a
    Chat Completions and a Responses conversation that open alike are two), or of a body
    whose format is not known (``None``)."""
    history = body.get("messages", body.get("input"))
    items = history if isinstance(history, list) else [history]
    system: Any = body.get("system", body.get("instructions"))
    first_user: Any = None
    reply: list[Any] = []
    for item in items:
        if first_user is None:
            if isinstance(item, str):
                first_user = item
                continue
            if not isinstance(item, Mapping):
                continue
            role = item.get("role")
            if system is None and role in _SYSTEM_ROLES:
                system = item.get("content")
            elif role == "user" and item.get("type") in _USER_TYPES:
                first_user = item.get("content")
            continue
        if not isinstance(item, Mapping):
            continue
        if item.get("role") in ("user", *_SYSTEM_ROLES) and item.get("type") in _USER_TYPES:
            if reply:
                break
            continue
        if item.get("role") == "tool" or str(item.get("type", "")).endswith("_output"):
            break  # a result closes the reply's turn
        reply.append(item)
    opening = [normal(system), normal(first_user)]
    if reply:
        opening.append(_reply_identity(reply))
    return opening if fmt is None else {"format": fmt, "opening": opening}


def _reply_identity(items: list[Mapping[str, Any]]) -> Any:
    """What the first reply is known by: the ids of its tool calls (the provider made them,
    and a client sends them back unchanged, or pairing would fail), else its text (thinking
    and reasoning, which some clients drop from old turns, are left out)."""
    ids: list[Any] = []
    texts: list[str] = []
    for item in items:
        if isinstance(item.get("call_id"), str):  # a Responses function call
            ids.append(item["call_id"])
        calls = item.get("tool_calls")  # Chat Completions
        ids += (
            [c.get("id") for c in calls if isinstance(c, Mapping)]
            if isinstance(calls, list)
            else []
        )
        content = item.get("content")
        blocks = content if isinstance(content, list) else [content]
        for block in blocks:
            if isinstance(block, Mapping) and block.get("type") in ("tool_use", "server_tool_use"):
                ids.append(block.get("id"))
            text = _text_of(block)
            if text is not None:
                texts.append(text)
    return ids if ids else "".join(texts)


def normal(value: Any) -> Any:
    """``value`` without the markers clients move between turns, and a list of text
    blocks read as its text (a client may send a system prompt as a string on one turn
    and as a marked block on the next). Not idempotent (a list of strings is read as
    their text): an opening is made normal once, by the format that reads it."""
    if isinstance(value, Mapping):
        return {k: normal(v) for k, v in value.items() if k not in MOVED_MARKERS}
    if isinstance(value, list):
        texts = [_text_of(block) for block in value]
        if value and all(text is not None for text in texts):
            return "".join(t for t in texts if t is not None)
        return [normal(v) for v in value]
    return value


def _text_of(block: Any) -> str | None:
    if isinstance(block, str):
        return block
    if isinstance(block, Mapping) and block.get("type") in ("text", "input_text", "output_text"):
        text = block.get("text")
        return text if isinstance(text, str) else None
    return None
