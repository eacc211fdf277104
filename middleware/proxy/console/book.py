"""What the console keeps of each request: the steps' new actions with the text the model
saw instead (and what a repair dropped), cut to ``proxy.console.request_bytes``
(:mod:`.record`), and the answer's bill once the ledger has it.

A request's record is kept as the JSON the console serves (ASCII bytes), so what it holds
is what it counts. The records count in the session memory budget
(``proxy.session_memory_bytes``): the session pool asks the book to :meth:`ConsoleBook.shed`
its oldest records before it makes any session forget its state. Nothing goes to disk.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from middleware.conversations.cleaning import Cleaned
from middleware.ledger.sums import Entry
from middleware.policy.settings import section
from middleware.proxy.console.paging import Asked, Requests, page_of
from middleware.proxy.console.record import encoded, fitted
from middleware.report import Action

#: Bytes counted for a request's record beside its JSON: the objects holding it and its
#: bill.
RECORD_OVERHEAD = 512
#: Bytes counted for a session beside its records: its counts, and each action it
#: remembers having shown (to tell a new one from one a later request repeats).
SESSION_OVERHEAD = 1024
ACTION_KEY_BYTES = 96
#: Sessions kept at most (the ledger's bound); the least recently seen go first.
MAX_SESSIONS = 10_000
#: The fewest bytes a request's record may be given (its counts and a few actions).
MIN_REQUEST_BYTES = 2048

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
#: its opening, or (Gemini) its first reply's call ids.
_DIGESTED = ("opening", "call_ids")
#: What an agent's ``User-Agent`` starts with, for the sources two agents share (opencode
#: sends ``session-id`` to OpenAI, as Codex does; Gemini CLI names no session).
_AGENT_OF_USER_AGENT = (
    ("claude-cli/", "Claude Code"),
    ("codex_", "Codex"),
    ("opencode/", "opencode"),
    ("geminicli", "Gemini CLI"),
)
#: Kinds that repeat a decision made by an earlier request (never new).
_REPEATING = frozenset({"decision_replayed"})
_COMPACTIONS = frozenset({"truncated", "summarized", "input_cleared"})


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


@dataclass(eq=False)
class Note:
    """One request as the console keeps it: its JSON (:attr:`kept`), and the answer's bill
    once it is read."""

    number: int
    kept: bytes
    billed: bytes = b""
    #: Seconds keeping it took (the access log's ``console_ms``, with its bill's).
    seconds: float = 0.0
    #: The book's :attr:`~ConsoleBook.version` when it last changed (kept, or billed).
    stamp: int = 0
    #: What its answer cost and would have cost without the middleware (``None``: not
    #: billed yet, or not priced), for the session's running cost.
    dollars: tuple[float, float] | None = None
    #: The session whose records count it (``None`` once it is shed, or if never kept).
    owner: _Session | None = field(default=None, repr=False)

    @property
    def size(self) -> int:
        """Bytes counted for it."""
        return len(self.kept) + len(self.billed) + RECORD_OVERHEAD

    def json(self) -> bytes:
        if not self.billed:
            return self.kept
        return self.kept[:-1] + b',"bill":' + self.billed + b"}"


@dataclass(eq=False)
class _Session:
    session: str
    agent: str
    source: str
    format: str | None
    requests: int = 0
    repairs: int = 0
    spills: int = 0
    compactions: int = 0
    first: float | None = None
    last: float | None = None
    notes: deque[Note] = field(default_factory=deque)
    #: Requests whose record was shed to stay within the memory budget.
    forgotten: int = 0
    #: The actions shown already, by (step, kind, call id or position).
    shown: set[int] = field(default_factory=set)
    #: Bytes counted for the session.
    bytes: int = SESSION_OVERHEAD

    def summary(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "agent": self.agent,
            "source": self.source,
            "format": self.format,
            "requests": self.requests,
            "repairs": self.repairs,
            "spills": self.spills,
            "compactions": self.compactions,
            "first": self.first,
            "last": self.last,
        }


class ConsoleBook:
    """The console's records of the sessions seen lately, within ``request_bytes`` a
    request; thread-safe. :attr:`version` moves whenever a record does (the pages poll it)."""

    def __init__(self, request_bytes: int, max_sessions: int = MAX_SESSIONS) -> None:
        self.request_bytes = max(request_bytes, MIN_REQUEST_BYTES)
        self.max_sessions = max_sessions
        self.version = 0
        #: Tells this book's versions from another's (a proxy started again).
        self.epoch = uuid.uuid4().hex[:12]
        #: Records shed to stay within the memory budget, since the proxy started.
        self.shed_records = 0
        self._held = 0
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._lock = threading.Lock()

    # -- written as requests pass ---------------------------------------------------------

    def note(self, cleaned: Cleaned, *, route: str, user_agent: str, now: float) -> Note | None:
        """Keep what the steps did to one request (``None``: it belongs to no session)."""
        key = cleaned.session
        if key is None:
            return None
        started = time.perf_counter()
        report = cleaned.report
        fmt = report.format if report is not None else None
        with self._lock:
            entry = self._sessions.pop(key.session, None)
            if entry is None:
                agent = agent_of(key.source, fmt if fmt is not None else route, user_agent)
                entry = _Session(key.session, agent, key.source, fmt)
                self._held += entry.bytes
            self._sessions[key.session] = entry
            entry.format = fmt or entry.format
            entry.requests += 1
            entry.first = now if entry.first is None else entry.first
            entry.last = now
            number = entry.requests
            before = entry.bytes
            new, repeated = _new_actions(entry, report.actions if report is not None else ())
            self._held += entry.bytes - before
            entry.repairs += sum(1 for a in new if a.step == "pairing")
            entry.spills += sum(1 for a in new if a.kind == "spilled")
            entry.compactions += sum(1 for a in new if a.kind in _COMPACTIONS)
            self._trim_sessions()
        record: dict[str, Any] = {"n": number, "time": now, "route": route, "format": fmt}
        if report is not None:
            record.update(
                policy=report.policy,
                messages=[report.messages_before, report.messages_after],
                chars=[report.result_chars_before, report.result_chars_after],
                repeated=repeated,
            )
        record.update(continued=cleaned.continued, untouched=cleaned.untouched)
        if cleaned.error is not None:
            record["error"] = f"{type(cleaned.error).__name__}: {cleaned.error}"
        kept = fitted(record, new, cleaned, self.request_bytes - RECORD_OVERHEAD)
        note = Note(number, kept, seconds=time.perf_counter() - started)
        with self._lock:
            self.version += 1
            note.stamp = self.version
            if self._sessions.get(key.session) is entry:
                note.owner = entry
                _in_order(entry.notes, note)
                entry.bytes += note.size
                self._held += note.size
        return note

    def billed(self, note: Note, entry: Entry | None) -> None:
        """Add the bill of the request ``note`` keeps (``None``: its usage was not read)."""
        bill: dict[str, Any] = {"unread": True}
        if entry is not None:
            bill = {
                "model": entry.model,
                "billed": entry.billed.as_dict(),
                "without": entry.without.as_dict(),
                "dollars": entry.dollars,
                "dollars_without": entry.dollars_without,
            }
        text = encoded(bill)
        with self._lock:
            self.version += 1
            note.stamp = self.version
            if entry is not None and entry.dollars is not None:
                note.dollars = (entry.dollars, entry.dollars_without or 0.0)
            if len(text) + len(note.kept) + RECORD_OVERHEAD > self.request_bytes:
                return  # no room left in the request's bound: the bill is in the ledger
            note.billed = text
            if note.owner is not None:
                note.owner.bytes += len(text)
                self._held += len(text)

    # -- the memory budget ----------------------------------------------------------------

    @property
    def held_bytes(self) -> int:
        """Bytes counted for everything the book keeps."""
        return self._held

    def shed(self, over: int) -> int:
        """Forget the oldest records, those of the sessions seen least recently first,
        then (with no record left) the sessions seen least recently, until ``over`` bytes
        are freed or nothing is left; returns the bytes freed."""
        freed = 0
        with self._lock:
            for session in self._sessions.values():
                while session.notes and freed < over:
                    note = session.notes.popleft()
                    note.owner = None
                    session.bytes -= note.size
                    session.forgotten += 1
                    freed += note.size
                    self.shed_records += 1
                if freed >= over:
                    break
            while freed < over and self._sessions:
                _, session = self._sessions.popitem(last=False)
                freed += session.bytes
            self._held -= freed
            if freed:
                self.version += 1
        return freed

    def _trim_sessions(self) -> None:
        """Forget the least recently seen sessions past :attr:`max_sessions` (lock held)."""
        while len(self._sessions) > self.max_sessions:
            _, session = self._sessions.popitem(last=False)
            for note in session.notes:
                note.owner = None
            self._held -= session.bytes

    # -- read by the pages ----------------------------------------------------------------

    def summaries(self) -> dict[str, dict[str, Any]]:
        """Every session's counts, by session."""
        with self._lock:
            return {name: s.summary() for name, s in self._sessions.items()}

    def requests(self, session: str, asked: Asked) -> Requests | None:
        """A session's counts and the requests ``asked`` for (``None``: the book does not
        know it)."""
        with self._lock:
            found = self._sessions.get(session)
            if found is None:
                return None
            summary = {**found.summary(), "forgotten": found.forgotten}
            return page_of(list(found.notes), summary, self.version, asked)


def _in_order(notes: deque[Note], note: Note) -> None:
    """Add ``note`` to ``notes`` by its number: after the last, but for a request kept
    after a later one of its session (two cleaned at once)."""
    at = len(notes)
    while at and notes[at - 1].number > note.number:
        at -= 1
    notes.insert(at, note)


def _new_actions(session: _Session, actions: Iterable[Action]) -> tuple[list[Action], int]:
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
