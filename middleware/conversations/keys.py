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
from middleware.formats.openings import CALL_IDS, message_opening

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

_SURROGATE = re.compile("[\ud800-\udfff]")
_CLAUDE_CODE_USER = re.compile(r"session_([0-9A-Za-z-]{8,64})")


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
    request in ``codec``'s format when it is known (what its conversations repeat is the
    format's to say: :meth:`.Codec.opening`)."""
    named = named_session(headers, body)
    if named is not None:
        return named
    opening = codec.opening(body) if codec is not None else None
    if opening is None:  # no format known, or nothing in it: the shared reading
        opening = message_opening(body, codec.name if codec is not None else None)
    by_calls = isinstance(opening, Mapping) and set(opening) == {CALL_IDS}
    return SessionKey("conv-" + _digest(opening), "call_ids" if by_calls else "opening")


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


def _digest(opening: Any) -> str:
    """The digest of an opening, as a format gave it (:meth:`.Codec.opening`)."""
    text = json.dumps(opening, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:20]
