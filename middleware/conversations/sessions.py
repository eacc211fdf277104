"""Which conversation a request belongs to, and the state kept for each one.

A conversation maps to one pipeline: one spill workspace, one set of frozen decisions.
The mapping depends only on the request, so a restarted proxy, or another replica, makes
the same choice: the ``X-Chatcli-Session`` header when the client sets one, else Claude
Code's session (its ``X-Claude-Code-Session-Id`` header, or the session in Anthropic
``metadata.user_id``), else a digest of the conversation's opening (its system prompt and
first user message), which every later request of the conversation repeats.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from middleware.cache import CacheSettings, DerivedCache
from middleware.pipeline import Pipeline
from middleware.plugin.host import PluginHost
from middleware.policy import Policy
from middleware.policy.settings import bind

logger = logging.getLogger(__name__)

SESSION_HEADER = "x-chatcli-session"
CLAUDE_CODE_HEADER = "x-claude-code-session-id"
_CLAUDE_CODE_USER = re.compile(r"session_([0-9A-Za-z-]{8,64})")


@dataclass(frozen=True)
class SessionKey:
    session: str
    #: How the session was found: ``header``, ``claude-code``, ``metadata`` or ``opening``.
    source: str


def session_of(headers: Mapping[str, str], body: Mapping[str, Any]) -> SessionKey:
    """The conversation ``body`` belongs to (``headers`` with lower-case names)."""
    explicit = headers.get(SESSION_HEADER, "").strip()
    if explicit:
        return SessionKey(explicit, "header")
    claude_code = headers.get(CLAUDE_CODE_HEADER, "").strip()
    if claude_code:
        return SessionKey(claude_code, "claude-code")
    from_metadata = _metadata_session(body.get("metadata"))
    if from_metadata:
        return SessionKey(from_metadata, "metadata")
    return SessionKey("conv-" + _opening_digest(body), "opening")


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
        return session if isinstance(session, str) and session else None
    match = _CLAUDE_CODE_USER.search(user)
    return match.group(1) if match else None


def _opening_digest(body: Mapping[str, Any]) -> str:
    """A digest of what every request of a conversation starts with: the system prompt
    (Anthropic ``system``, Responses ``instructions``, or the first system or developer
    message) and the first user message."""
    history = body.get("messages", body.get("input"))
    items = history if isinstance(history, list) else [history]
    system: Any = body.get("system", body.get("instructions"))
    first_user: Any = None
    for item in items:
        if not isinstance(item, Mapping):
            if first_user is None and isinstance(item, str):
                first_user = item
            continue
        role = item.get("role")
        if system is None and role in ("system", "developer"):
            system = item.get("content")
        elif role == "user" and first_user is None:
            first_user = item.get("content")
        if first_user is not None and system is not None:
            break
    opening = json.dumps([system, first_user], sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(opening.encode("ascii")).hexdigest()[:20]


@dataclass
class _Entry:
    pipeline: Pipeline
    last_used: float
    requests: int = 0


@dataclass
class SessionPool:
    """One pipeline per (policy, session), released after ``idle_seconds`` without a
    request (its spill files stay: the previews the agent holds name them)."""

    host: PluginHost
    idle_seconds: float
    clock: Callable[[], float] = time.monotonic
    #: One cache of reused work for every session (made at the first request, of that
    #: policy's ``cache.max_bytes``): the same tool output or system prompt seen by two
    #: sessions is read once.
    cache: DerivedCache | None = None
    _entries: dict[tuple[str, str], _Entry] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def pipeline(self, policy_key: str, policy: Policy, session: str) -> Pipeline:
        """The pipeline of ``session`` under the policy named ``policy_key``, on the
        policy's latest snapshot."""
        now = self.clock()
        with self._lock:
            entry = self._entries.get((policy_key, session))
            stale = None
            if entry is not None and now - entry.last_used > self.idle_seconds:
                # Idle too long to trust its memory: `gc` may have removed what it names.
                stale, entry = self._entries.pop((policy_key, session)), None
            if entry is None:
                if self.cache is None:
                    self.cache = DerivedCache(bind(policy, CacheSettings).max_bytes)
                pipe = Pipeline(policy, host=self.host, session_id=session, cache=self.cache)
                entry = _Entry(pipe, now)
                self._entries[(policy_key, session)] = entry
            elif entry.pipeline.policy is not policy:
                entry.pipeline.replace_policy(policy)
            entry.last_used = now
            entry.requests += 1
            idle = [
                key
                for key, other in self._entries.items()
                if now - other.last_used > self.idle_seconds
            ]
            released = [self._entries.pop(key) for key in idle]
            if stale is not None:
                released.append(stale)
        for old in released:
            old.pipeline.close()
        return entry.pipeline

    def end(self, session: str) -> int:
        """Release ``session``'s pipelines (under every policy); returns how many."""
        with self._lock:
            keys = [key for key in self._entries if key[1] == session]
            ended = [self._entries.pop(key) for key in keys]
        for entry in ended:
            entry.pipeline.close()
        return len(ended)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def close(self) -> None:
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            entry.pipeline.close()
