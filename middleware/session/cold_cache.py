"""When a session's prompt cache is cold, and the schedule's moves made because it was.

Moving microcompaction's boundary rewrites everything after the first message it
changes, which the provider then writes to its cache again: the schedule makes a move
only when it pays for that write. When the cache is cold anyway, the whole prompt is
written whatever is sent, and the move costs nothing more. That is the case for a
provider without a prefix cache (``ledger.cache_lifetime_seconds: null``, known from the
policy), for a request sent after the session was idle past the cache's lifetime, and
for a session whose provider was measured not to read its cache back (two answers in a
row that read none of what the ledger expected).

The last two depend on the clock and on the provider's answers, not on the history, so
a move made for them is recorded, by the turn it moved to and the size of the history
before that turn: every later request of the session, in this process or after a
restart, makes it again and sends the same bytes. The record is kept in the session's
local workspace. A store shared by replicas keeps none (a replica cannot tell how long
the session was idle on another), so there only a policy without a cache makes moves
free, and the replicas still send the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

from middleware.policy.settings import section, setting

logger = logging.getLogger(__name__)

#: Answers in a row that read nothing of the cache the ledger expected them to read
#: before the session's cache is taken as cold for every request.
MISSES_FOR_COLD = 2
#: Fewer tokens than this expected from the cache are no evidence either way: a
#: provider caches prefixes from 1,024 tokens on.
MIN_EXPECTED_TOKENS = 1_024


@section("ledger")
@dataclass(frozen=True)
class CacheLifetime:
    """How long the provider keeps a prompt prefix after its last use (``None``: it
    keeps none)."""

    seconds: float | None = setting("ledger.cache_lifetime_seconds")


class ColdMove(NamedTuple):
    """A move made on a cold cache: the turn the boundary moved to, and what identifies
    the conversation at that point: the number of messages before that turn and a digest
    of the ids of the tool calls among them (which a cache marker moving from message to
    message leaves alone)."""

    turn: int
    messages: int
    calls: str


class ColdCache(NamedTuple):
    """What the schedule of one request knows of its session's cache beyond the history."""

    #: The provider keeps no prefix cache: every move is free.
    none: bool = False
    #: This request finds the session's cache cold: the latest candidate is free.
    now: bool = False
    #: The turns moved to on a cold cache before, in this conversation.
    moved: frozenset[int] = frozenset()


@dataclass
class ColdRequest:
    """One request's view of its session's cache, which the microcompaction step reads
    (:attr:`.Internal.cold_cache`) and completes with the move it made."""

    #: The provider keeps no prefix cache (the policy says so).
    none: bool = False
    #: This request finds the session's cache cold (idle, or measured).
    cold: bool = False
    moved: frozenset[ColdMove] = frozenset()
    #: The move this request made because the cache was cold (set by the step).
    made: ColdMove | None = None

    def schedule(self, identify: Callable[[int], ColdMove], *, follow: bool = True) -> ColdCache:
        """What the schedule is told, ``identify`` giving the move to a turn of this
        conversation (the moves recorded for another conversation are not its); without
        ``follow``, only what the policy says (``microcompact.schedule.cold_rewrites``)."""
        if not follow:
            return ColdCache(self.none)
        mine = frozenset(m.turn for m in sorted(self.moved) if identify(m.turn) == m)
        return ColdCache(self.none, self.cold, mine)


@runtime_checkable
class RecordStore(Protocol):
    """Where a session's record is kept (its local spill workspace)."""

    def load_record(self) -> str | None:
        """The record saved before, or ``None`` (none, unsafe or unreadable)."""

    def save_record(self, content: str, *, create: bool = True) -> None:
        """Keep ``content`` as the record, written whole (with ``create=False``, only
        where the session keeps something anyway).

        :raises OSError: it could not be written.
        """


class SessionCache:
    """One session's view of its provider's prompt cache: when its last request was
    sent, what the provider's answers said of the cache, and the moves made on a cold
    cache. Thread-safe. Without a store, no request is ever taken as cold."""

    def __init__(self, store: RecordStore | None) -> None:
        self._store = store
        self._lock = threading.Lock()
        #: When the session's last request was sent (seconds since the epoch).
        self.last: float | None = None
        self.moved: set[ColdMove] = set()
        #: Answers in a row that read nothing of what was expected of the cache.
        self.misses = 0
        if store is not None:
            self._load(store)

    def request(self, lifetime: float | None, now: float | None = None) -> ColdRequest:
        """The view of a request sent at ``now`` when the cache keeps a prefix
        ``lifetime`` seconds after its last use (``None``: no cache, which the policy
        says for every request alike). Without ``now`` the request has no time: it
        neither finds the cache idle nor counts as the session's latest, so a caller
        that gives no times gets the same output for the same input in any process."""
        with self._lock:
            idle = (
                now is not None
                and lifetime is not None
                and self.last is not None
                and not still_cached(lifetime, self.last, now)
            )
            measured = self.misses >= MISSES_FOR_COLD
            if now is not None:
                self.last = now if self.last is None else max(self.last, now)
            cold = self._store is not None and (idle or measured)
            return ColdRequest(lifetime is None, cold, frozenset(self.moved))

    def made(self, request: ColdRequest) -> None:
        """Record the move ``request`` made on a cold cache, if it made one. A move that
        cannot be recorded is still sent: after a restart the session is then
        rewritten once more, as it would be without this record."""
        if request.made is None:
            return
        with self._lock:
            if request.made in self.moved:
                return
            self.moved.add(request.made)
        self.save(create=True)

    def reported(self, expected: int | None, read: int) -> None:
        """What an answer of the session read from the cache (``read`` tokens) against
        what the ledger expected of it (``None``: nothing was expected)."""
        with self._lock:
            if read > 0:
                self.misses = 0
            elif expected is not None and expected >= MIN_EXPECTED_TOKENS:
                self.misses += 1

    def save(self, *, create: bool = False) -> None:
        """Write the record (the moves, and when the last request was sent), in a
        session folder that exists already unless ``create``: a pipeline closing after
        its session kept nothing leaves nothing behind."""
        if self._store is None:
            return
        with self._lock:
            if self.last is None and not self.moved:
                return
            record = {"moved": sorted(self.moved), "last": self.last}
        try:
            self._store.save_record(json.dumps(record), create=create)
        except OSError as exc:
            logger.warning("the session's cold-cache record was not kept: %s", exc)

    def _load(self, store: RecordStore) -> None:
        text = store.load_record()
        if text is None:
            return
        try:
            record = json.loads(text)
            moved = {_move(move) for move in record["moved"]}
            last = record["last"]
            if last is not None and not (isinstance(last, (int, float)) and math.isfinite(last)):
                raise ValueError("'last' is not a time")
        except (ValueError, TypeError, KeyError) as exc:
            logger.warning("the session's cold-cache record is unreadable, ignored: %s", exc)
            return
        self.moved, self.last = moved, last


def _move(value: object) -> ColdMove:
    if not isinstance(value, list) or len(value) != len(ColdMove._fields):
        raise ValueError(f"not a move: {value!r}")
    turn, messages, calls = value
    for count in (turn, messages):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"not a count: {count!r}")
    if not isinstance(calls, str):
        raise ValueError(f"not a digest: {calls!r}")
    return ColdMove(turn, messages, calls)


class CallsDigest:
    """The digest :class:`ColdMove` keeps of the ids of the calls before its turn, taken
    call by call (the moves of a conversation are named in the order of their turns, so
    one pass over the history names them all)."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def add(self, call: str) -> None:
        self._hash.update(call.encode("utf-8", "surrogatepass") + b"\0")

    @property
    def value(self) -> str:
        return self._hash.hexdigest()[:16]


def still_cached(lifetime: float | None, last: float | None, now: float) -> bool:
    """Whether a prefix the provider's cache last used at ``last`` is still there at
    ``now``, when it keeps one ``lifetime`` seconds (``None``: it keeps none)."""
    return lifetime is not None and last is not None and now - last <= lifetime
