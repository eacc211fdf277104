"""Which conversation a request belongs to, found from the request alone.

A conversation maps to one pipeline: one spill workspace, one set of frozen decisions, one
``DELETE /sessions/{id}``. The key depends only on the request, so a restarted proxy, or
another replica, makes the same choice. The agent's own id comes first, in the order of
:data:`HEADERS`, then the request body's (``prompt_cache_key``, a stored Responses
``conversation``, Claude Code's ``metadata.user_id``). A client that names no session
gets ``conv-`` and a digest of what its requests repeat: its wire format (a Chat
Completions and a Responses conversation that open alike are two), the opening (the
system prompt and first user message) and, once there is one, the model's first reply
(its tool-call ids, or its text). Markers that clients move from turn to turn (``cache_control``, a
Responses item's ``id`` and ``status``) are left out, so a conversation keeps its key;
two conversations that open alike part at their first reply, so they never share a key
once either has a tool result.

Gemini CLI names no session and, beside its conversation, calls a model without tools (its
model router, before each prompt) with a copy of the conversation's history or, before
the model's first reply, of its opening: :func:`run_part` says what such a request is,
for :mod:`.joining` to file it under the conversation it belongs to.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from middleware.formats.base import Codec

#: Request headers that name the agent's session, first match wins. Codex CLI sends
#: ``session-id`` (and its ``thread-id``, the same for a main session); opencode sends
#: ``x-session-id`` (and ``session-id`` to OpenAI).
HEADERS: tuple[str, ...] = (
    "x-chatcli-session",
    "x-claude-code-session-id",
    "session-id",
    "session_id",
    "x-session-id",
)
#: What Gemini CLI's ``User-Agent`` starts with (``GeminiCLI/0.61.0/...``,
#: ``GeminiCLI-tui/...``), lower-cased.
GEMINI_CLI = "geminicli"
#: Where the session of a client that names none is found: digested from its requests.
DIGESTED = ("opening", "call_ids")
#: Characters of a session id kept; a longer one is cut (its folder name carries a digest
#: of the whole id, :func:`middleware.spill.layout.session_folder_name`).
MAX_ID_CHARS = 256
#: Keys dropped wherever they appear in what the fallback digest reads: markers a client
#: moves or renumbers between the requests of one conversation.
MOVED_MARKERS = frozenset({"cache_control", "id", "status"})
#: The key of what :meth:`.Codec.opening` gives for a conversation known by its first
#: reply's call ids alone (``{"calls": [...]}``), not by its opening.
CALL_IDS = "calls"

_SURROGATE = re.compile("[\ud800-\udfff]")
_CLAUDE_CODE_USER = re.compile(r"session_([0-9A-Za-z-]{8,64})")
_SYSTEM_ROLES = ("system", "developer")
_USER_TYPES = (None, "message")


@dataclass(frozen=True)
class SessionKey:
    session: str
    #: Where the session was found: the header's name (:data:`HEADERS`),
    #: ``prompt_cache_key``, ``conversation``, ``metadata.user_id``, ``opening`` (a
    #: digest of the opening, with the first reply once there is one), ``call_ids`` (a
    #: digest of the first reply's call ids alone, :data:`CALL_IDS`), ``given`` (by the
    #: caller), or ``joined`` (the conversation a request waited for: :mod:`.joining`).
    source: str


@dataclass(frozen=True)
class RunPart:
    """What a Gemini CLI request is in its run, which its history alone does not tell
    apart from another run's (:mod:`.joining`)."""

    #: It declares no tools: a call beside the conversation (the model router's).
    side: bool
    #: The model's replies in its history (none: it is the request opening the
    #: conversation, or a side call made before it).
    replies: int
    #: What it says, in order (:meth:`.Codec.said`).
    said: tuple[str, ...]

    @property
    def waits(self) -> bool:
        """Whether it is filed once its conversation shows itself: a side call, or the
        request opening the conversation (whose key the model's first reply settles)."""
        return self.side or not self.replies


def run_part(
    headers: Mapping[str, str], body: Mapping[str, Any], codec: Codec | None
) -> RunPart | None:
    """What ``body`` is in its Gemini CLI run (``headers`` with lower-case names), or
    ``None`` for any other client."""
    if codec is None or not headers.get("user-agent", "").lower().startswith(GEMINI_CLI):
        return None
    said = codec.said(body)
    return None if said is None else RunPart(not body.get("tools"), said[1], said[0])


def session_of(
    headers: Mapping[str, str], body: Mapping[str, Any], codec: Codec | None = None
) -> SessionKey:
    """The conversation ``body`` belongs to (``headers`` with lower-case names), a
    request in ``codec``'s format when it is known (:meth:`.Codec.opening`)."""
    named = named_session(headers, body)
    if named is not None:
        return named
    opening = codec.opening(body) if codec is not None else None
    if opening is not None:
        by_calls = isinstance(opening, Mapping) and set(opening) == {CALL_IDS}
        return SessionKey(
            "conv-" + _digest(_normal(opening)), "call_ids" if by_calls else "opening"
        )
    return SessionKey("conv-" + _conversation_digest(body, codec), "opening")


def named_session(headers: Mapping[str, str], body: Mapping[str, Any]) -> SessionKey | None:
    """The session the request names, by a header or a field of its body; ``None``: it
    names none (a conversation is then known by its opening; a request without a history,
    an embedding, by nothing)."""
    for name in HEADERS:
        value = _usable(headers.get(name))
        if value:
            return SessionKey(value, name)
    cache_key = _usable(body.get("prompt_cache_key"))
    if cache_key:
        return SessionKey(cache_key, "prompt_cache_key")
    stored = body.get("conversation")  # a Responses conversation the provider stores
    stored = _usable(stored.get("id") if isinstance(stored, Mapping) else stored)
    if stored:
        return SessionKey(stored, "conversation")
    from_metadata = _metadata_session(body.get("metadata"))
    if from_metadata:
        return SessionKey(from_metadata, "metadata.user_id")
    return None


def _usable(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    value = value.strip()
    # A lone surrogate is no character a folder, a header or a JSON answer can hold.
    return _SURROGATE.sub("\ufffd", value[:MAX_ID_CHARS]) if value else None


def _metadata_session(metadata: Any) -> str | None:
    """Claude Code's ``metadata.user_id``: ``user_<hash>_account_<id>_session_<uuid>``, or
    (newer versions) a JSON object with a ``session_id``."""
    user = metadata.get("user_id") if isinstance(metadata, Mapping) else None
    if not isinstance(user, str):
        return None
    if user.lstrip().startswith("{"):
        try:
            decoded = json.loads(user)
        except ValueError:
            decoded = None
        session = decoded.get("session_id") if isinstance(decoded, dict) else None
        return _usable(session)
    match = _CLAUDE_CODE_USER.search(user)
    return match.group(1) if match else None


def _conversation_digest(body: Mapping[str, Any], codec: Codec | None) -> str:
    """A digest of what every request of a conversation repeats: its format (``codec``'s,
    when it is known), the system prompt (Anthropic ``system``, Responses
    ``instructions``, or the first system or developer message), the first user message
    and, when the history has one, the first reply."""
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
    opening = [_normal(system), _normal(first_user)]
    if reply:
        opening.append(_reply_identity(reply))
    return _digest(opening if codec is None else {"format": codec.name, "opening": opening})


def _digest(opening: Any) -> str:
    text = json.dumps(opening, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:20]


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


def _normal(value: Any) -> Any:
    """``value`` without the markers clients move between turns, and a list of text
    blocks read as its text (a client may send a system prompt as a string on one turn
    and as a marked block on the next)."""
    if isinstance(value, Mapping):
        return {k: _normal(v) for k, v in value.items() if k not in MOVED_MARKERS}
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
