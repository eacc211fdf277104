"""Filing the requests of a Gemini CLI run that its history alone does not name: the
calls it makes beside its conversation (its model router's, which declare no tools) and
the request that opens the conversation, before the model's first reply.

Gemini CLI names no session, and its conversation is known by the ids of the first
reply's calls (:mod:`.keys`), which the CLI makes once that reply has come: the requests
sent before it cannot carry them, and two runs of one prompt in one folder send them alike.
So they wait in a :class:`Lobby`, and the next request of the conversation that repeats
what they say (:meth:`.Codec.said`, in order) takes them:

* the request opening the conversation takes the side calls made before it on the same
  opening (the router's; those already answered, if any is: another run's may be on
  their way);
* the conversation's first request after the model's first reply takes one opening
  request (the oldest: two runs' are alike, so each conversation takes one);
* any request of the conversation takes the side calls made for it (the router's copy
  of its history and the new prompt);
* what no request took within :data:`JOIN_SECONDS` of its answer is filed under its own
  key (a side call taken by an opening request, under the opening's).

Requests are only taken by requests of the same caller. The lobby lives in one process:
a replica that did not answer the opening request files it under its own key.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from middleware.conversations.keys import RunPart, SessionKey

logger = logging.getLogger(__name__)

#: Seconds a request waits, once answered, for the request of its conversation that takes
#: it (the conversation's first request after the model's first reply comes once that
#: reply's calls have run).
JOIN_SECONDS = 120.0
#: Requests waiting at most: past it, the oldest is filed under its own key.
MAX_WAITING = 512
#: Conversations remembered as having come (none takes an opening request after its first).
MAX_SEEN = 10_000
#: The source of the key a request that waited is filed under (:class:`.SessionKey`).
JOINED = "joined"

#: Files a request under a session (its console record, its bill, its log line).
Filing = Callable[[SessionKey], None]
_Ready = list[tuple[Filing, SessionKey]]


@dataclass(eq=False)
class Waiting:
    """A request waiting for its conversation to show itself."""

    key: SessionKey
    part: RunPart
    caller: str | None
    #: Digests of what it says, in order.
    said: tuple[bytes, ...]
    lobby: Lobby
    #: When its answer ended (the lobby's clock), ``None`` before.
    ended: float | None = None
    #: The session it is filed under, once known.
    joined: SessionKey | None = None
    #: Files it, once its answer has ended and until it is filed.
    filing: Filing | None = None
    #: The side calls an opening request took: they go where it goes.
    adopted: list[Waiting] = field(default_factory=list)
    #: The opening request that took it, if one did.
    parent: Waiting | None = None

    @property
    def opening(self) -> bool:
        return not self.part.side and not self.part.replies

    def end(self, filing: Filing) -> None:
        """Its answer has ended: ``filing`` files it, now if its session is known."""
        self.lobby.ended(self, filing)


@dataclass
class Lobby:
    """The requests waiting to be filed, of every caller (thread-safe). A thread that
    files the expired ones starts with the first request that waits, and ends with
    :meth:`close`."""

    seconds: float = JOIN_SECONDS
    most: int = MAX_WAITING
    clock: Callable[[], float] = time.monotonic
    _waiting: OrderedDict[int, Waiting] = field(default_factory=OrderedDict)
    _seen: OrderedDict[str, None] = field(default_factory=OrderedDict)
    _lock: threading.Condition = field(default_factory=threading.Condition)
    _thread: threading.Thread | None = None
    _closed: bool = False

    def wait(self, key: SessionKey, part: RunPart, caller: str | None) -> Waiting:
        """A request that waits (:attr:`.RunPart.waits`), filed under ``key`` unless its
        conversation takes it; a request opening a conversation takes the side calls
        before it on the same opening."""
        waiting = Waiting(key, part, caller, _digests(part.said), self)
        ready: _Ready = []
        with self._lock:
            if self._closed:
                waiting.joined = key
                return waiting
            if waiting.opening:
                before = [
                    other
                    for other in self._loose(caller)
                    if other.part.side
                    and not other.part.replies
                    and _within(other.said, waiting.said)
                ]
                answered = [other for other in before if other.ended is not None]
                for other in answered or before:  # a run asks its router, then opens
                    other.parent = waiting
                    waiting.adopted.append(other)
            self._waiting[id(waiting)] = waiting
            while len(self._waiting) > self.most:
                oldest = next(w for w in self._waiting.values() if w.parent is None)
                ready += self._settle(oldest, None)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._expire, name="chatcli-joining", daemon=True
                )
                self._thread.start()
        _file(ready)
        return waiting

    def claim(self, key: SessionKey, part: RunPart, caller: str | None) -> int:
        """A request of the conversation ``key`` (the model has replied in it) takes the
        side calls made for it and, if it is the conversation's first request after the
        model's first reply, one request opening it; how many it took."""
        ready: _Ready = []
        with self._lock:
            first = part.replies == 1 and key.session not in self._seen
            self._seen[key.session] = None
            self._seen.move_to_end(key.session)
            while len(self._seen) > MAX_SEEN:
                self._seen.popitem(last=False)
            loose = self._loose(caller)
            said = _digests(part.said) if loose else ()
            for waiting in loose:
                if waiting.opening:
                    if not first or not _within(waiting.said, said):
                        continue
                    first = False
                elif not waiting.part.replies or not _within(waiting.said, said):
                    continue  # a side call before the first reply waits for its opening
                ready += self._settle(waiting, SessionKey(key.session, JOINED))
        _file(ready)
        return len(ready)

    def ended(self, waiting: Waiting, filing: Filing) -> None:
        """``waiting``'s answer has ended: filed now if its session is known, else once
        it is (or it expires)."""
        with self._lock:
            waiting.ended = self.clock()
            joined = waiting.joined
            waiting.filing = filing if joined is None else None
            self._lock.notify()
        if joined is not None:
            _file([(filing, joined)])

    def close(self) -> None:
        """File every request waiting under its own key (the process ends), and stop."""
        with self._lock:
            self._closed = True
            loose = [w for w in self._waiting.values() if w.parent is None]
            ready = [filed for w in loose for filed in self._settle(w, None)]
            self._lock.notify()
            thread = self._thread
        _file(ready)
        if thread is not None:
            thread.join(timeout=5)

    def __len__(self) -> int:
        with self._lock:
            return len(self._waiting)

    # -- under the lock -------------------------------------------------------------------

    def _loose(self, caller: str | None) -> list[Waiting]:
        """The requests of ``caller`` waiting that no opening request took, oldest first."""
        return [w for w in self._waiting.values() if w.caller == caller and w.parent is None]

    def _settle(self, waiting: Waiting, key: SessionKey | None) -> _Ready:
        """``waiting`` and what it took, filed under ``key`` (``None``: its own key, and
        its own session for what it took): out of the lobby; those answered, to file."""
        ready = []
        for one in (*waiting.adopted, waiting):  # as they came
            self._waiting.pop(id(one), None)
            if key is not None:
                one.joined = key
            else:
                one.joined = waiting.key if one is waiting else SessionKey(
                    waiting.key.session, JOINED)  # fmt: skip
            if one.filing is not None:
                ready.append((one.filing, one.joined))
                one.filing = None
        return ready

    def _expire(self) -> None:
        """File what comes due, as it does, until the lobby closes."""
        while True:
            with self._lock:
                if self._closed:
                    return
                ready, deadline = self._due()
                if not ready:
                    self._lock.wait(None if deadline is None else deadline - self.clock())
            _file(ready)

    def sweep(self) -> int:
        """File what waited :attr:`seconds` past its answer (its side calls' too) under
        its own key, now (the lobby's thread does as it comes due); how many."""
        with self._lock:
            ready, _ = self._due()
        _file(ready)
        return len(ready)

    def _due(self) -> tuple[_Ready, float | None]:
        """Settle what is due; the next time something is (``None``: nothing waits for
        its time, only for an answer or a request)."""
        now = self.clock()
        ready: _Ready = []
        deadline = None
        for waiting in [w for w in self._waiting.values() if w.parent is None]:
            ends = [w.ended for w in (waiting, *waiting.adopted)]
            if any(end is None for end in ends):
                continue  # an answer still on its way
            due = max(end for end in ends if end is not None) + self.seconds
            if due <= now:
                ready += self._settle(waiting, None)
            elif deadline is None or due < deadline:
                deadline = due
        return ready, deadline


def _digests(said: tuple[str, ...]) -> tuple[bytes, ...]:
    return tuple(hashlib.blake2b(s.encode("utf-8", "surrogatepass"), digest_size=8).digest()
                 for s in said)  # fmt: skip


def _within(part: tuple[bytes, ...], whole: tuple[bytes, ...]) -> bool:
    """Whether ``part`` is in ``whole``, in order (an empty one is in nothing)."""
    if not part:
        return False
    rest = iter(whole)
    return all(any(item == other for other in rest) for item in part)


def _file(ready: Iterable[tuple[Filing, SessionKey]]) -> None:
    """Call each filing (never under the lobby's lock); one that fails is logged."""
    for filing, key in ready:
        try:
            filing(key)
        except Exception:  # never the reason another request goes unfiled
            logger.exception("could not file a request under session %s", key.session)
