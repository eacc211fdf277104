"""What the console records of each request: the steps' new actions with the text the model
saw instead (and what a repair dropped), cut to ``proxy.console.request_bytes``
(:mod:`.record`), put in the records database (``ledger.url``: :mod:`middleware.records`)
that every replica shares, with the session's counts. The answer's bill is the ledger's
row, which names the request's record (:attr:`Note.key`).

The book writes without waiting for the database (:meth:`Records.put`). All it holds in
memory is, for each session seen lately, the actions it has shown (to tell a new one from
one a later request repeats): counted in the session memory budget
(``proxy.session_memory_bytes``), and given back first when the pool is over it. A
database in memory (``ledger.url: null``) is pruned to ``ledger.console_bytes`` as the
records come, not only once an hour.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from middleware.conversations.cleaning import Cleaned
from middleware.conversations.joining import JOINED
from middleware.conversations.keys import DIGESTED
from middleware.conversations.readbacks import ReadBack
from middleware.ledger.sums import name
from middleware.policy.settings import section
from middleware.proxy.console.record import encoded, fitted
from middleware.records import Records, RequestRow
from middleware.records.store import MEMORY
from middleware.report import Action, ActionKind, Step

logger = logging.getLogger(__name__)

#: Bytes counted for a request's record beside its JSON (the row holding it).
RECORD_OVERHEAD = 512
#: Bytes counted for a session the book remembers, and for each action it remembers
#: having shown (to tell a new one from one a later request repeats).
SESSION_OVERHEAD = 256
ACTION_KEY_BYTES = 96
#: Sessions remembered at most (the ledger's bound); the least recently seen go first.
MAX_SESSIONS = 10_000
#: The fewest bytes a request's record may be given (its counts and a few actions).
MIN_REQUEST_BYTES = 2048
#: A database in memory is pruned each time records of this share of
#: ``ledger.console_bytes`` were put since the last time.
PRUNE_SHARE = 4

#: Who sends a session key from each source (:class:`~middleware.conversations.keys.SessionKey`).
_AGENT_OF_SOURCE = {
    "x-claude-code-session-id": "Claude Code",
    "metadata.user_id": "Claude Code",
    "session-id": "Codex",
    "session_id": "Codex",
    "x-session-id": "opencode",
    "x-chatcli-session": "SDK",
    "given": "SDK",
    "prompt_cache_key": "SDK",
    "conversation": "SDK",
}
#: Sources of a key digested from the conversation itself (a client that names no session):
#: its opening, or (Gemini) its first reply's call ids, or the conversation a request
#: waited for (Gemini CLI: :mod:`middleware.conversations.joining`).
_DIGESTED = (*DIGESTED, JOINED)
#: What an agent's ``User-Agent`` starts with, for the sources two agents share (opencode
#: sends ``session-id`` to OpenAI, as Codex does; Gemini CLI names no session).
_AGENT_OF_USER_AGENT = (
    ("claude-cli/", "Claude Code"),
    ("codex_", "Codex"),
    ("opencode/", "opencode"),
    ("geminicli", "Gemini CLI"),
)
#: The share of a request's record its read-backs may take (the rest are counted).
READBACKS_SHARE = 4
#: Characters of a read-back's names a record keeps at most (a path's end: the file).
MAX_NAME_CHARS = 200
#: Kinds that repeat a decision made by an earlier request (never new).
_REPEATING = frozenset({ActionKind.DECISION_REPLAYED})
_COMPACTIONS = frozenset({ActionKind.TRUNCATED, ActionKind.SUMMARIZED, ActionKind.INPUT_CLEARED})


@section("proxy.console")
@dataclass(frozen=True)
class ConsoleSettings:
    enabled: bool
    request_bytes: int


def agent_of(source: str, fmt: str | None, user_agent: str = "") -> str:
    """The agent that sent a request, from where its session key came (``source``); its
    ``User-Agent`` settles the sources two agents share."""
    lowered = user_agent.lower()
    by_header = next((agent for start, agent in _AGENT_OF_USER_AGENT if lowered.startswith(start)),
                     None)  # fmt: skip
    if source in ("session-id", "session_id", *_DIGESTED) and by_header is not None:
        return by_header
    if source in _DIGESTED:
        return "Gemini CLI" if fmt == "gemini" else "SDK"
    return _AGENT_OF_SOURCE.get(source, "SDK")


@dataclass(frozen=True)
class Note:
    """The record of one request, put in the records: its key (the ledger's answer names
    it) and the seconds keeping it took (the access log's ``console_ms``)."""

    key: str
    seconds: float


@dataclass(eq=False)
class _Seen:
    """What the book remembers of a session: the actions shown already, by (step, kind,
    call id or position)."""

    shown: set[int] = field(default_factory=set)
    #: Bytes counted for it.
    bytes: int = SESSION_OVERHEAD


class ConsoleBook:
    """Puts the console's record of each request in ``records``, within ``request_bytes``
    a request; remembers the actions each of the sessions seen lately has shown (their
    memory is the pool's to bound: :meth:`shed`). Thread-safe."""

    def __init__(
        self, records: Records, request_bytes: int, max_sessions: int = MAX_SESSIONS
    ) -> None:
        self.records = records
        self.request_bytes = max(request_bytes, MIN_REQUEST_BYTES)
        self.max_sessions = max_sessions
        #: Sessions whose shown actions were forgotten to stay within the memory budget.
        self.forgotten = 0
        self._held = 0
        self._sessions: OrderedDict[str, _Seen] = OrderedDict()
        self._lock = threading.Lock()
        settings = records.settings
        #: Bytes of records put between two prunings of a database in memory (``None``:
        #: the proxy's hourly pruning is enough).
        self._prune_after = (
            settings.console_bytes // PRUNE_SHARE
            if settings is not None and settings.console_bytes and records.where == MEMORY
            else None
        )
        self._unpruned = 0
        self._pruning = False

    def note(
        self,
        cleaned: Cleaned,
        *,
        route: str,
        user_agent: str,
        now: float,
        caller: str | None = None,
    ) -> Note | None:
        """Record what the steps did to one request (``None``: it belongs to no
        session); ``caller``: the digest of its API key."""
        key = cleaned.session
        if key is None:
            return None
        started = time.perf_counter()
        session = name(key.session)
        report = cleaned.report
        fmt = report.format if report is not None else None
        with self._lock:
            seen = self._sessions.pop(session, None)
            if seen is None:
                seen = _Seen()
                self._held += seen.bytes
            self._sessions[session] = seen
            before = seen.bytes
            new, repeated = _new_actions(seen, report.actions if report is not None else ())
            self._held += seen.bytes - before
            self._trim_sessions()
        record: dict[str, Any] = {"time": now, "route": route, "format": fmt}
        if report is not None:
            record.update(
                policy=report.policy,
                messages=[report.messages_before, report.messages_after],
                chars=[report.result_chars_before, report.result_chars_after],
                repeated=repeated,
            )
        record.update(continued=cleaned.continued, untouched=cleaned.untouched)
        if cleaned.readbacks:
            room = (self.request_bytes - RECORD_OVERHEAD) // READBACKS_SHARE
            record["readbacks"] = shown = _read_backs(cleaned.readbacks, room)
            record["readbacks_omitted"] = len(cleaned.readbacks) - len(shown)
        if cleaned.observed:  # observe mode: what the steps would have done
            record["observed"] = True
        if cleaned.error is not None:
            record["error"] = f"{type(cleaned.error).__name__}: {cleaned.error}"
        kept = fitted(record, new, cleaned, self.request_bytes - RECORD_OVERHEAD)
        row = RequestRow(
            uuid.uuid4().hex, session, now, self.records.replica, kept,
            agent=agent_of(key.source, fmt if fmt is not None else route, user_agent),
            source=key.source, format=fmt, caller=caller,
            repairs=sum(1 for a in new if a.step == Step.PAIRING),
            spills=sum(1 for a in new if a.kind == ActionKind.SPILLED),
            compactions=sum(1 for a in new if a.kind in _COMPACTIONS),
        )  # fmt: skip
        self.records.put(row)  # never waits: dropped (and counted) if the queue is full
        self._prune_soon(len(kept))
        return Note(row.key, time.perf_counter() - started)

    def _prune_soon(self, put: int) -> None:
        """Prune a database in memory in a thread of its own once records of a share of
        its bound were put since the last time."""
        if self._prune_after is None:
            return
        with self._lock:
            self._unpruned += put
            if self._pruning or self._unpruned < self._prune_after:
                return
            self._unpruned, self._pruning = 0, True
        threading.Thread(target=self._prune, name="chatcli-console-prune", daemon=True).start()

    def _prune(self) -> None:
        try:
            self.records.prune()
        except Exception:  # never the reason a request fails: the hourly pruning comes
            logger.exception("could not prune the console records in memory")
        finally:
            with self._lock:
                self._pruning = False

    # -- the memory budget ----------------------------------------------------------------

    @property
    def held_bytes(self) -> int:
        """Bytes counted for what the book remembers."""
        return self._held

    def shed(self, over: int) -> int:
        """Forget the shown actions of the sessions seen least recently until ``over``
        bytes are freed or none is left (their next requests show again what an earlier
        one showed); returns the bytes freed."""
        freed = 0
        with self._lock:
            while freed < over and self._sessions:
                _, seen = self._sessions.popitem(last=False)
                freed += seen.bytes
                self.forgotten += 1
            self._held -= freed
        return freed

    def _trim_sessions(self) -> None:
        """Forget the least recently seen sessions past :attr:`max_sessions` (lock held)."""
        while len(self._sessions) > self.max_sessions:
            _, seen = self._sessions.popitem(last=False)
            self._held -= seen.bytes


def _read_backs(found: Iterable[ReadBack], room: int) -> list[dict[str, Any]]:
    """The read-backs of a request as its record shows them, as many as fit in ``room``
    bytes of JSON (a path cut to its end, which names the file)."""
    shown: list[dict[str, Any]] = []
    for read_back in found:
        path = read_back.path
        if path is not None and len(path) > MAX_NAME_CHARS:
            path = "…" + path[-MAX_NAME_CHARS:]
        entry = {"kind": read_back.kind, "tool": read_back.tool[:MAX_NAME_CHARS],
                 "step": read_back.step, "call": read_back.call_id[:MAX_NAME_CHARS],
                 "path": path, "chars": read_back.result_chars}  # fmt: skip
        room -= len(encoded(entry)) + 1
        if room < 0:
            break
        shown.append(entry)
    return shown


def _new_actions(session: _Seen, actions: Iterable[Action]) -> tuple[list[Action], int]:
    """The actions of a request the session has not shown yet (remembered now), and how
    many others it repeats (a frozen decision applied again, or an earlier request's
    action carried over)."""
    new: list[Action] = []
    repeated = 0
    for action in actions:
        where = action.tool_call_id or f"@{action.message_index}"
        key = hash((action.step, action.kind, where))
        if action.kind in _REPEATING or key in session.shown:
            repeated += 1
            continue
        session.shown.add(key)
        session.bytes += ACTION_KEY_BYTES
        new.append(action)
    return new, repeated
