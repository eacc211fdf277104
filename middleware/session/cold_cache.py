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

Several processes may serve one session from one local folder (two proxies, a proxy and
``chatcli-mw process``: the default root is the system temporary folder, which every
process of the user shares). Each merges its record with the one on disk under a lock
before writing it, and reads it again before a request when it changed, so none erases
what another recorded and all make the same moves. A record that cannot be read (too
large, not JSON, numbers that are no count or time) is said in the log and taken as none
(the record's format and reading: :mod:`middleware.session.cold_record`).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from middleware.policy.settings import section, setting
from middleware.session.cold_record import (
    MAX_RECORD_BYTES,
    UNREADABLE,
    ColdMove,
    RecordStore,
    parse_record,
    record_text,
)

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


class SessionCache:
    """One session's view of its provider's prompt cache: when its last request was
    sent, what the provider's answers said of the cache, and the moves made on a cold
    cache, merged with those other processes recorded. Thread-safe. Without a store, no
    request is ever taken as cold."""

    def __init__(self, store: RecordStore | None) -> None:
        self._store = store
        self._lock = threading.Lock()
        #: When the session's last request was sent (seconds since the epoch).
        self.last: float | None = None
        self.moved: set[ColdMove] = set()
        #: Answers in a row that read nothing of what was expected of the cache.
        self.misses = 0
        #: Why the record as it is now could not be read (``None``: it could, or there
        #: is none); the session is cleaned as if it had none.
        self.unreadable: str | None = None
        #: The stamp of the record as this process last read or wrote it.
        self._stamp: object = None
        self._refresh()

    def request(self, lifetime: float | None, now: float | None = None) -> ColdRequest:
        """The view of a request sent at ``now`` when the cache keeps a prefix
        ``lifetime`` seconds after its last use (``None``: no cache, which the policy
        says for every request alike). Without ``now`` the request has no time: it
        neither finds the cache idle nor counts as the session's latest, so a caller
        that gives no times gets the same output for the same input in any process."""
        self._refresh()
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

    def save(self, *, create: bool = False, until: float | None = None) -> None:
        """Write the record (the moves, and when the last request was sent), in a
        session folder that exists already unless ``create``: a pipeline closing after
        its session kept nothing leaves nothing behind. Under the record's lock (waited
        for until ``until``, a ``time.monotonic()``, if given), what another process
        wrote since this one last read it is merged in first."""
        store = self._store
        if store is None:
            return
        with self._lock:
            if self.last is None and not self.moved:
                return
        try:
            with store.record_lock(create=create, until=until) as writable:
                if not writable:
                    return
                stamp = store.record_stamp()
                if stamp is not None and stamp != self._stamp:
                    self._take_in(store, stamp)
                with self._lock:
                    moved, last = sorted(self.moved), self.last
                content = record_text(moved, last)  # ASCII: bytes = chars
                if len(content) > MAX_RECORD_BYTES:
                    logger.warning(
                        "the session's cold-cache record %s was not kept: its %s moves take "
                        "%s bytes, more than the %s a record may hold (after a restart, the "
                        "session is rewritten once more)",
                        store.record_location, f"{len(moved):,}", f"{len(content):,}",
                        f"{MAX_RECORD_BYTES:,}",
                    )  # fmt: skip
                    return
                store.save_record(content)
                with self._lock:
                    self._stamp, self.unreadable = store.record_stamp(), None
        except OSError as exc:
            logger.warning("the session's cold-cache record was not kept: %s", exc)

    def _refresh(self) -> None:
        """Take in the record if it changed since this process last read or wrote it
        (another process serving the session wrote it)."""
        if self._store is None:
            return
        stamp = self._store.record_stamp()
        if stamp is not None and stamp != self._stamp:
            self._take_in(self._store, stamp)

    def _take_in(self, store: RecordStore, stamp: object) -> None:
        """Merge the record, as ``stamp`` (taken before reading it) says it is, with what
        this process knows. An unreadable record is said once, and taken as none."""
        try:
            text = store.load_record(MAX_RECORD_BYTES)
            moved, last = parse_record(text) if text is not None else (set(), None)
        except UNREADABLE as exc:
            why = f"{type(exc).__name__}: {exc}"
            with self._lock:
                self._stamp, self.unreadable = stamp, why
            logger.warning(
                "the session's cold-cache record %s is unreadable, ignored (the session is "
                "cleaned as if it had none, and its next move writes the record anew): %s",
                store.record_location, why,
            )  # fmt: skip
            return
        with self._lock:
            self._stamp, self.unreadable = stamp, None
            self.moved |= moved
            if last is not None:
                self.last = last if self.last is None else max(self.last, last)


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
