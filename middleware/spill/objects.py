"""Spill stores in an object store (``s3://bucket/prefix``, or any fsspec URL), shared by
replicas.

Every replica of a proxy (or every process of a platform) that names the same
``spill.url`` reads and writes the same objects: a result is saved as
``<prefix>/chatcli-agent-<session>/tool-results/<key>-<digest16>.<suffix>``, so two
replicas saving the same output name the same object, and the second finds it there and
writes nothing (on S3 the write is conditional, so even two that race write it once).
Each object is written whole in one request (an S3 ``PUT`` is atomic: no reader ever sees
part of it); on a filesystem without atomic writes it is written under a temporary name
and moved into place. A read returns only an object whose content matches the digest in
its name.

A store that fails (down, refusing the credentials, no such bucket) raises
:class:`~middleware.spill.layout.SpillError`, which the steps handle as ``spill.on_error``
says; for ``spill.retry_after_seconds`` after a failure, new saves fail at once and reads
find nothing, so a store that is down costs one timeout, not one per result. Every call
has a deadline (``spill.timeout_seconds``, retries included): a store that accepts
connections and never answers fails like one that is down. The call runs on the root's
own threads, so a hung store never takes the threads that serve requests
(:mod:`middleware.spill.store_calls`).

Nothing here removes a session's objects when a pipeline closes: replicas share them.
``chatcli-mw gc`` and the proxy's ``DELETE /sessions/{id}`` do, through
:meth:`ObjectRoot.remove`. So that ``gc`` never takes a session a process still serves,
each process keeps a *hold* in the folders it uses (:mod:`middleware.spill.holds`).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from middleware.spill.holds import HOLD_SECONDS, Background, Holds, HoldStore
from middleware.spill.known_objects import KnownObjects
from middleware.spill.layout import (
    MARKER,
    RESULTS,
    SHARED,
    SpillError,
    SpillKey,
    describe,
    is_result_name,
    is_session_folder,
    session_folder_name,
    spill_file_name,
    split_location,
    verified_text,
)
from middleware.spill.listing import folders_in, remove_folder, written_in
from middleware.spill.roots import SessionFolder
from middleware.spill.store_calls import StoreCalls

logger = logging.getLogger(__name__)

#: Protocols whose single write is atomic (the object appears whole or not at all).
ATOMIC_PUT = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "memory"})
#: Keyword arguments that make an s3fs write one PUT up to S3's 5 GiB limit (never a
#: multipart upload) and a read one GET (no HEAD first).
S3_WRITE = {"chunksize": 2**32}
S3_READ = {"max_concurrency": 1}


class ObjectRoot:
    """The root ``url`` of session folders in the fsspec filesystem ``fs`` (at ``base``,
    the URL without its protocol), shared by every pipeline of the process that uses it."""

    def __init__(
        self,
        fs: Any,
        base: str,
        *,
        retry_after: float,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._fs = fs
        self._base = base.rstrip("/")
        self.url: str = fs.unstrip_protocol(self._base)
        protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
        s3 = bool({"s3", "s3a"} & set(protocols))
        self._atomic = bool(ATOMIC_PUT & set(protocols))
        #: s3fs writes with ``If-None-Match: *`` (``mode="create"``).
        self._conditional = s3
        self._write_options: Mapping[str, Any] = S3_WRITE if s3 else {}
        self._read_options: Mapping[str, Any] = S3_READ if s3 else {}
        self._clock = clock
        #: The objects saved or read lately, and the small ones' texts.
        self._known = KnownObjects()
        #: The calls to the store, each within its deadline, and whether it is down.
        self._calls = StoreCalls(self.url, retry_after=retry_after, timeout=timeout, clock=clock)
        #: This process's holds in the folders under the root (``wall``: their POSIX times).
        self.holds = Holds(self._hold_store(), clock=clock, wall=wall)

    def workspace(self, session_id: str, *, hold: float = HOLD_SECONDS) -> ObjectWorkspace:
        """The store of one session under this root, which its process may still use
        ``hold`` seconds after its last use (its idle horizon)."""
        return ObjectWorkspace(self, session_id, hold=hold)

    def location(self, folder: str, name: str) -> str:
        """The URL a preview names for result ``name`` of ``folder``."""
        return f"{self.url}/{folder}/{RESULTS}/{name}"

    def key_of(self, location: str) -> SpillKey | None:
        """``location`` split into folder and name if it is a result URL under this root."""
        key = split_location(location)
        return key if key is not None and key.root == self.url else None

    # -- writing -----------------------------------------------------------------------

    def save(self, folder: str, name: str, content: str, *, hold: float = HOLD_SECONDS) -> str:
        """Store ``content`` as result ``name`` of ``folder`` unless it is there already,
        holding the folder for ``hold`` seconds more; return its URL."""
        location = self.location(folder, name)
        path = self._path(folder, RESULTS, name)
        if self._known.knows(path, self._clock()):
            return location
        self._calls.check_up(f"cannot save spilled output to {location}")
        data = content.encode("utf-8", "surrogatepass")

        def write() -> None:
            self.holds.keep(folder, hold)
            existing = self._get(path)
            if existing is None:
                self._create(path, data)
            elif existing != data:  # not what its name says: write it right
                self._put(path, data)
            else:
                return  # there already: nothing written that could be left behind
            self.holds.wrote(folder, hold)

        self._calls.within(write, f"cannot save spilled output to {location}")
        self._calls.up()
        self._known.remember(path, self._clock())
        self._known.keep(path, content, len(data))
        return location

    # -- holds -------------------------------------------------------------------------

    def settle(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds for the holds being kept in the background (a
        process about to exit, or a test, that wants them in the store)."""
        self.holds.settle(timeout)

    def _hold_store(self) -> HoldStore:
        """The store calls :class:`Holds` may make: plain requests, which it makes on this
        root's threads (they look ``_fs`` up when called, so a wrapped one counts them)."""
        return HoldStore(
            url=self.url,
            mark=lambda folder: self._put(self._path(folder, MARKER), SHARED),
            put=lambda folder, name, data: self._put(self._path(folder, name), data),
            get=lambda folder, name: self._get(self._path(folder, name)),
            delete=lambda folder, name: self._fs.rm_file(self._path(folder, name)),
            written=lambda folder: written_in(self._fs, self._base, folder),
            forget=self._forget,
            submit=self._calls.submit,
            down=lambda: self.trouble is not None,
        )

    def _create(self, path: str, data: bytes) -> None:
        """Write ``path`` only if nothing is there yet (S3's conditional ``PUT``), so two
        replicas that spill the same output at the same moment write it once. A store
        that refuses conditional writes gets plain ones from then on."""
        if not self._conditional:
            self._put(path, data)
            return
        try:
            self._fs.pipe_file(path, data, mode="create", **self._write_options)
        except FileExistsError:  # another replica was first
            if self._get(path) != data:
                self._put(path, data)
        except Exception as exc:
            self._put(path, data)  # raises if the store itself fails
            self._conditional = False
            logger.info(
                "the spill store %s refused a conditional write (%s): writing without the "
                "condition from now on",
                self.url,
                describe(exc),
            )

    def _put(self, path: str, data: bytes) -> None:
        if self._atomic:
            self._fs.pipe_file(path, data, **self._write_options)
            return
        folder = path.rpartition("/")[0]
        partial = f"{folder}/.partial-{uuid.uuid4().hex}"
        self._fs.makedirs(folder, exist_ok=True)  # a filesystem with folders needs them
        self._fs.pipe_file(partial, data)
        try:
            self._fs.mv(partial, path)
        except BaseException:
            with contextlib.suppress(Exception):  # the move's error is the one to report
                self._fs.rm_file(partial)
            raise

    def _get(self, path: str) -> bytes | None:
        try:
            data: bytes = self._fs.cat_file(path, **self._read_options)
        except FileNotFoundError:
            return None
        return data

    # -- reading -----------------------------------------------------------------------

    def recall(self, folder: str, name: str) -> str | None:
        """:meth:`read`, from memory when this process saved or read it lately: what the
        steps use to recognise their own previews on every request (a result never
        changes under its name; only retention removes it)."""
        cached = self._known.cached(self._path(folder, RESULTS, name))
        return cached if cached is not None else self.read(folder, name)

    def read(self, folder: str, name: str) -> str | None:
        """The result ``name`` of ``folder`` if a store saved it (the digest matches),
        as the store has it now; ``None`` for anything else.

        :raises SpillError: the store cannot be read (down, no credentials).
        """
        if not is_session_folder(folder) or not is_result_name(name):
            return None
        path = self._path(folder, RESULTS, name)
        doing = f"cannot read {self.location(folder, name)}"
        self._calls.check_up(doing)
        data = self._calls.within(lambda: self._get(path), doing)
        self._calls.up()
        if data is None:
            return None
        text = verified_text(name, data)
        if text is not None:
            self._known.remember(path, self._clock())
            self._known.keep(path, text, len(data))
        return text

    # -- retention -----------------------------------------------------------------------

    def sessions(self) -> list[SessionFolder]:
        """The folders under the root that hold a marker, with their newest object's time."""
        return self._calls.within(
            lambda: folders_in(self._fs, self._base, self.url),
            f"cannot list the sessions of {self.url}",
            down=False,
        )

    def remove(self, folder: str) -> bool:
        """Remove what a store wrote in ``folder`` (see :func:`remove_folder`), and forget
        it here."""
        removed = self._calls.within(
            lambda: remove_folder(self._fs, self._base, self.url, folder),
            f"cannot remove {self.url}/{folder}",
            down=False,
        )
        if not removed:
            return False
        self.holds.forget(folder)
        self._forget(folder)
        return True

    def _forget(self, folder: str) -> None:
        """Forget that anything is stored in ``folder``: it was removed."""
        self._known.forget(self._path(folder) + "/")

    # -- helpers -------------------------------------------------------------------------

    def _path(self, *parts: str) -> str:
        return "/".join((self._base, *parts))

    @property
    def trouble(self) -> str | None:
        """Why the store counts as down now, or ``None`` (for health checks)."""
        return self._calls.trouble


class ObjectWorkspace:
    """One session's spill store in an :class:`ObjectRoot` (the ``SpillStore`` protocol):
    ``save`` returns the result's URL, ``load`` reads back only this session's results.

    Its process may still use the session ``hold`` seconds after its last use (its idle
    horizon: ``proxy.session_idle_seconds`` of the policy, or what a session pool says
    with :meth:`hold`); the hold it keeps in the store says so to ``gc``.
    """

    def __init__(self, root: ObjectRoot, session_id: str, *, hold: float = HOLD_SECONDS) -> None:
        self.root = root
        self.folder = session_folder_name(session_id)
        self.horizon = hold
        self._closed = False

    #: No workspace on this machine: the session's record and readings are kept in
    #: memory only.
    local: None = None

    def location(self, key: str, content: str, *, suffix: str = ".txt") -> str:
        """Where :meth:`save` would store ``content`` (nothing is written)."""
        return self.root.location(self.folder, spill_file_name(key, content, suffix))

    def save(self, key: str, content: str, *, suffix: str = ".txt") -> str:
        """Store ``content`` and return its URL; an object already holding it is reused."""
        name = spill_file_name(key, content, suffix)
        if self._closed:
            raise SpillError(
                f"the spill store of {self.root.url}/{self.folder} is closed (the pipeline "
                "that owns it was closed): nothing more can be saved there"
            )
        return self.root.save(self.folder, name, content, hold=self.horizon)

    def hold(self, seconds: float) -> Background | None:
        """The session is in use, and may be for ``seconds`` more (a session pool's idle
        horizon, with each request): keep its hold in the store (see
        :meth:`Holds.hold`: a store call about once an hour, in the background)."""
        if self._closed:
            return None
        self.horizon = seconds
        return self.root.holds.hold(self.folder, seconds)

    def load(self, location: str) -> str | None:
        """The content saved at ``location`` by this session's store, else ``None`` (also
        when the store cannot be read: logged)."""
        key = self.root.key_of(location)
        if key is None or key.folder != self.folder:
            return None
        try:
            text = self.root.recall(key.folder, key.name)
        except SpillError as exc:  # the steps treat it as nothing saved there
            logger.warning("%s", exc)
            return None
        if text is not None and not self._closed:  # the session uses what is there
            self.root.holds.hold(self.folder, self.horizon, using=True)
        return text

    def close(self) -> None:
        """Refuse further saves; the objects stay (replicas share them), and so does the
        hold until it ends (another pipeline of the process may use the session)."""
        if not self._closed:
            self._closed = True
            self.root.holds.release(self.folder, self.horizon)
