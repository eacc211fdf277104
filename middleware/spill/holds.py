"""Holds: what a process declares in an object store about the session folders it uses, so
that ``chatcli-mw gc`` never removes one it still serves, whatever ``gc``'s own policy says.

Each process that uses a session keeps a hold in its folder
(:data:`~middleware.spill.layout.HOLD_PREFIX`): until when it may still use it, its idle
horizon (``proxy.session_idle_seconds``) plus :data:`MARK_SECONDS` past its last use,
renewed as it goes on using it. And since ``gc`` (or ``DELETE`` on another replica) may
still remove a folder a process writes into, a process that wrote new results checks
within :data:`CHECK_SECONDS`, or when it closes, that its hold is still there, and if not
puts the marker and its hold back: what it wrote stays something ``gc`` removes later.

This module decides when to write, check and renew holds; the root
(:class:`~middleware.spill.objects.ObjectRoot`) owns the store and lends it the few calls
it needs (:class:`HoldStore`), so the layout of a folder and the store's failure handling
stay in one place.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from middleware.spill.layout import describe, hold_name

logger = logging.getLogger(__name__)

#: A process using a session writes its marker and its hold again this often, so the
#: folder's age counts from the last use of any replica and the hold (which reaches this
#: far beyond the process's idle horizon) never lapses while it uses the session.
MARK_SECONDS = 3600.0
#: A process that wrote new results into a session checks, at its next save or request
#: this long after its last check (or when it closes the session), that its hold is still
#: there: ``gc`` or ``DELETE /sessions/...`` on another replica may have removed the folder.
CHECK_SECONDS = 60.0
#: How long a pipeline may still use its session after its last use of the store, when
#: nothing says otherwise: the default ``proxy.session_idle_seconds``.
HOLD_SECONDS = 3600.0

Background = concurrent.futures.Future[None]


@dataclass(frozen=True)
class HoldStore:
    """The store calls holds make, lent by their root. Each is one plain request (the root
    runs :class:`Holds`' blocking methods on its store threads, under the deadline of the
    save that calls them, and its background calls through ``submit``)."""

    #: The root's URL, for messages.
    url: str
    #: Write the marker of a folder (without it ``gc`` never sees the folder).
    mark: Callable[[str], None]
    #: Write, read (``None``: not there) and delete (``FileNotFoundError``: not there)
    #: object ``name`` of a folder.
    put: Callable[[str, str, bytes], None]
    get: Callable[[str, str], bytes | None]
    delete: Callable[[str, str], None]
    #: What a store wrote in a folder besides its marker (one listing).
    written: Callable[[str], list[str]]
    #: The folder was removed: the root forgets what it knew was stored there.
    forget: Callable[[str], None]
    #: Run a call on the root's store threads (``RuntimeError``: they are shut down).
    submit: Callable[[Callable[[], None]], Background]
    #: Whether the store counts as down now (``spill.retry_after_seconds``).
    down: Callable[[], bool]


@dataclass
class _Held:
    """What this process declared in one session folder."""

    #: The hold's name, and the POSIX time it lasts until.
    name: str
    until: float
    #: When (on the monotonic clock) the hold was last written or found in the store.
    checked: float
    #: Results this process wrote into the folder, and how many of them were followed by a
    #: check that the folder is still there.
    writes: int = 0
    verified: int = 0


class Holds:
    """This process's holds in the session folders of one root."""

    def __init__(
        self, store: HoldStore, *, clock: Callable[[], float], wall: Callable[[], float]
    ) -> None:
        self._store = store
        self._clock = clock
        #: POSIX time, which holds are written in (``gc`` reads them on another machine).
        self._wall = wall
        #: Names this process's holds.
        self._process = uuid.uuid4().hex[:12]
        self._lock = threading.Lock()
        self._held: dict[str, _Held] = {}
        #: One lock per folder: a hold is declared or checked by one thread at a time.
        self._holding: dict[str, threading.Lock] = {}
        #: Folders with a hold being kept in the background, and those calls.
        self._pending: set[str] = set()
        self._background: set[Background] = set()

    # -- without waiting for the store (a request's thread) ------------------------------

    def hold(self, folder: str, seconds: float, *, using: bool = False) -> Background | None:
        """This process may use ``folder`` for ``seconds`` more (what a session pool says
        with each request; a workspace, when it reads from the folder, with ``using``).

        A store call is made only when one is due, in the background (the caller never
        waits for the store): when the hold this process declared ends within
        ``seconds`` (about once per :data:`MARK_SECONDS`), or when results it wrote have
        gone :data:`CHECK_SECONDS` without a check that the folder is still there. A
        folder this process never wrote or read gets no hold (``using``: it read it).
        Returns the background call, or ``None`` when none was due.
        """
        now, wall = self._clock(), self._wall()
        with self._lock:
            held = self._held.get(folder)
            if held is None:
                due = using
            else:
                unchecked = held.writes > held.verified and now - held.checked >= CHECK_SECONDS
                due = held.until < wall + seconds or unchecked
            if not due or folder in self._pending:
                return None
        if self._store.down():
            return None

        def keep() -> None:
            self._verify(folder, seconds)
            self.keep(folder, seconds)

        return self._in_background(folder, keep)

    def release(self, folder: str, seconds: float) -> Background | None:
        """A pipeline using ``folder`` closed: check, in the background, that what this
        process wrote there since its last check is in a folder ``gc`` still sees."""
        with self._lock:
            held = self._held.get(folder)
            if held is None or held.writes == held.verified:
                return None
        return self._in_background(folder, lambda: self._verify(folder, seconds))

    def forget(self, folder: str) -> None:
        """The root removed ``folder``: nothing is held there any more."""
        with self._lock:
            self._held.pop(folder, None)

    def settle(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds for the holds being kept in the background (a
        process about to exit, or a test, that wants them in the store)."""
        with self._lock:
            running = list(self._background)
        concurrent.futures.wait(running, timeout)

    # -- on the store's threads ------------------------------------------------------------

    def keep(self, folder: str, seconds: float) -> None:
        """Declare that this process may use ``folder`` for ``seconds`` more, unless
        what it declared last says so already (before a result is written there)."""
        with self._folder_lock(folder):
            with self._lock:
                held = self._held.get(folder)
            if held is None or held.until < self._wall() + seconds:
                self._declare(folder, seconds, held)

    def wrote(self, folder: str, seconds: float) -> None:
        """A result was written into ``folder``: check that the folder is still there if
        the last check is :data:`CHECK_SECONDS` old."""
        with self._lock:
            held = self._held.get(folder)
            due = held is not None and self._clock() - held.checked >= CHECK_SECONDS
            if held is not None:
                held.writes += 1
        if held is None:  # this process removed the folder meanwhile: mark it again
            self.keep(folder, seconds)
        elif due:
            self._verify(folder, seconds)

    def _declare(self, folder: str, seconds: float, previous: _Held | None) -> None:
        """Write the folder's marker (a folder without it is not one a store created, and
        ``gc`` leaves it alone) and this process's hold, lasting ``seconds`` plus
        :data:`MARK_SECONDS` (the hold is written again before that margin runs out), then
        remove its previous hold. The caller holds the folder's lock."""
        with self._lock:
            current = self._held.get(folder)
            # what was written before the marker goes in is in a folder gc sees
            covered = current.writes if current is not None else 0
        until = self._wall() + seconds + MARK_SECONDS
        name = hold_name(until, self._process)
        self._store.mark(folder)
        held = {"held_until": until, "idle_seconds": seconds, "process": self._process}
        self._store.put(folder, name, (json.dumps(held) + "\n").encode())
        if previous is not None and previous.name != name:
            with contextlib.suppress(FileNotFoundError):
                self._store.delete(folder, previous.name)
        with self._lock:
            current = self._held.get(folder)
            writes = current.writes if current is not None else 0
            self._held[folder] = _Held(name, until, self._clock(), writes, covered)

    def _verify(self, folder: str, seconds: float) -> None:
        """Check that this process's hold in ``folder`` is still there if it wrote results
        since the last check. If it is gone, ``gc`` or another replica removed the folder:
        forget what this process knew of it, and if results were written since (the folder
        holds any), write the marker and the hold again, so that a later ``gc`` removes
        them instead of leaving them for good."""
        url = self._store.url
        with self._folder_lock(folder):
            with self._lock:
                held = self._held.get(folder)
                if held is None or held.writes == held.verified:
                    return
                writes = held.writes
            if self._store.get(folder, held.name) is not None:
                with self._lock:
                    held.checked = self._clock()
                    held.verified = max(held.verified, writes)
                return
            self._store.forget(folder)
            left = self._store.written(folder)
            if not left:  # removed with all this process wrote: nothing left behind
                self.forget(folder)
                logger.info("%s/%s was removed while this process used it", url, folder)
                return
            logger.warning(
                "%s/%s was removed while this process still uses it (gc, or DELETE "
                "/sessions on another replica), and %d objects were written there since: "
                "writing its marker again, so that gc removes them later",
                url,
                folder,
                len(left),
            )
            self._declare(folder, seconds, None)

    # -- helpers ---------------------------------------------------------------------------

    def _folder_lock(self, folder: str) -> threading.Lock:
        with self._lock:
            return self._holding.setdefault(folder, threading.Lock())

    def _in_background(self, folder: str, call: Callable[[], None]) -> Background | None:
        def run() -> None:
            try:
                call()
            except Exception as exc:  # the next save or request tries again
                logger.warning(
                    "cannot keep the hold on %s/%s: %s", self._store.url, folder, describe(exc)
                )
            finally:
                with self._lock:
                    self._pending.discard(folder)

        with self._lock:
            self._pending.add(folder)
        try:
            future = self._store.submit(run)
        except RuntimeError:  # shut down: the process is ending
            with self._lock:
                self._pending.discard(folder)
            return None
        with self._lock:
            self._background.add(future)
        future.add_done_callback(self._done)
        return future

    def _done(self, future: Background) -> None:
        with self._lock:
            self._background.discard(future)
