"""The session key of a client that names no session, as ``conversations/keys.py`` derived
it by hand before the formats said their conversations' opening (commit 07f26c4): the
reference every codec's answer is checked against (tests/formats/test_openings.py), so a
conversation keeps its key across the change, byte for byte."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from middleware.formats.base import Codec

_MOVED = frozenset({"cache_control", "id", "status"})
_SYSTEM_ROLES = ("system", "developer")
_USER_TYPES = (None, "message")


def reference_key(body: Mapping[str, Any], codec: Codec | None) -> tuple[str, str]:
    """The key (session, source) of ``body`` with no session named, in ``codec``'s format."""
    if codec is not None and codec.name == "gemini":
        opening = _gemini_opening(body)
        by_calls = isinstance(opening, Mapping) and set(opening) == {"calls"}
        return "conv-" + _digest(_normal(opening)), "call_ids" if by_calls else "opening"
    return "conv-" + _conversation_digest(body, codec), "opening"


def _gemini_opening(body: Mapping[str, Any]) -> Any:
    contents = body.get("contents")
    first_user: Any = None
    reply: list[dict[str, Any]] = []
    for content in contents if isinstance(contents, list) else []:
        if not isinstance(content, dict):
            continue
        if content.get("role") == "model":
            reply += [p for p in content.get("parts") or [] if isinstance(p, dict)]
        elif reply:
            break
        elif first_user is None:
            first_user = content.get("parts")
    ids = [call.get("id") for part in reply if isinstance(call := part.get("functionCall"), dict)]
    if ids and all(isinstance(uid, str) and uid for uid in ids):
        return {"calls": ids}
    texts = [p["text"] for p in reply if isinstance(p.get("text"), str) and not p.get("thought")]
    return [body.get("systemInstruction"), first_user, "".join(texts)]


def _conversation_digest(body: Mapping[str, Any], codec: Codec | None) -> str:
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
            break
        reply.append(item)
    opening = [_normal(system), _normal(first_user)]
    if reply:
        opening.append(_reply_identity(reply))
    return _digest(opening if codec is None else {"format": codec.name, "opening": opening})


def _digest(opening: Any) -> str:
    text = json.dumps(opening, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:20]


def _reply_identity(items: list[Mapping[str, Any]]) -> Any:
    ids: list[Any] = []
    texts: list[str] = []
    for item in items:
        if isinstance(item.get("call_id"), str):
            ids.append(item["call_id"])
        calls = item.get("tool_calls")
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


def _normal(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _normal(v) for k, v in value.items() if k not in _MOVED}
    if isinstance(value, list):
        texts = [_text_of(block) for block in value]
        if value and all(text is not None for text in texts):
            return "".join(t for t in texts if t is not None)
        return [_normal(v) for v in value]
    return value


def _text_of(block: Any) -> str | None:
    if isinstance(block, str):
        return block
    if isinstance(block, Mapping) and block.get("type") in ("text", "input_text", "output_text"):
        text = block.get("text")
        return text if isinstance(text, str) else None
    return None
