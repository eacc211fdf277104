"""Readings of result texts kept beside a session's spill files, for a process that starts
cold.

A restarted proxy (or a second process on the same spill folder) gets the session's whole
history again with an empty cache, and the readings that scan a result's text (the
outline of a preview, what a summary keeps) are most of what a cold request costs. Each
is a pure function of the text, a few numbers and this product's code, so it is kept
under a name digested from all three and read back instead of worked out again: in
memory (:attr:`DerivedCache.readings`, which outlives the entries keyed by whole texts
when more sessions are live than the cache holds the texts of), and in the session's
local workspace.

A reading is only taken from a private file of this user's, of :data:`MAX_READING_BYTES`
at most, whose content names the same digest, decodes to the right shape and could be the
reading of its text (its kind's ``check``: an outline shows only lines of the text, a
summary only what the text says); anything else is ignored (logged), worked out and
written again. Whoever can write the session's folder (the agent itself can) cannot make
a reading say what its text does not.
The code is part of the name: a reading written by another version of the modules it
comes from is never found. Object stores keep no readings: a round trip to one costs
more than the reading itself.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, TypeVar, runtime_checkable

from middleware.cache.digests import text_digest
from middleware.cache.lru import DerivedCache

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Bumped if the naming or the file's shape changes.
FORMAT = 1
#: Readings of texts shorter than this are not kept: working one out costs less than
#: writing and reading a file.
MIN_TEXT_CHARS = 4_096
#: Nor of texts longer than this: digesting one costs about what reading it does (an
#: outline scans a bounded part of the text; a summary stops at its mentions).
MAX_TEXT_CHARS = 1_000_000
#: Bytes of a reading's file read back, at most; a larger one is not read. The 887
#: readings kept replaying the trajectories of ../shared/data under the default, lean and
#: claude-code policies take 11 KB at most (outlines 3.5 KB); an outline of
#: budget.preview.outline_chars (3,000) takes 36 KB at worst in JSON (12 bytes a
#: character), so this leaves room for any outline up to 85,000 characters.
MAX_READING_BYTES = 1 << 20

_ABSENT = object()


@runtime_checkable
class ReadingStore(Protocol):
    """Where a session's readings are kept, by name (a spill workspace)."""

    def load_reading(self, name: str, decode: Callable[[str], T | None]) -> T | None:
        """The reading saved under ``name`` as ``decode`` reads its content, or ``None``
        (missing, unsafe, unreadable, more than :data:`MAX_READING_BYTES`, or what
        ``decode`` does not take)."""

    def save_reading(self, name: str, content: str) -> None:
        """Keep ``content`` under ``name`` (best effort: a failure is logged and ignored)."""


@dataclass(frozen=True)
class KeptKind:
    """A reading that is kept: its cache key's first item, the modules whose code it
    comes from, its value as JSON and back (``decode`` gives ``None`` for anything that
    is not a value it could have encoded), and whether a value read back could be the
    reading of its key (``check``: cheaper than working it out, and never true of a value
    that says what the key's text does not)."""

    name: str
    modules: tuple[str, ...]
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]
    check: Callable[[Any, tuple[Hashable, ...]], bool]


class KeptReadings:
    """``cache``, with the readings of a :class:`KeptKind` also kept in ``store``."""

    def __init__(self, cache: DerivedCache, store: ReadingStore | None) -> None:
        self.cache = cache
        self.store = store

    def derive(
        self,
        kind: KeptKind,
        key: tuple[Hashable, ...],
        compute: Callable[[], T],
        size: int | Callable[[T], int],
        texts: tuple[str, ...] = (),
    ) -> T:
        """:meth:`DerivedCache.derive` of ``key`` (``(kind.name, text, *numbers)``); on a
        miss, the reading kept by digest in memory or in the store, else ``compute()``,
        kept in both."""
        if not self.cache.enabled:
            return compute()
        found = self.cache.get(key, _ABSENT)
        if found is not _ABSENT:
            value: T = found
            return value
        measure = size if callable(size) else lambda _: size
        value = self._remembered(kind, key, compute, measure)
        self.cache.put(key, value, measure(value), texts)
        return value

    def _remembered(
        self,
        kind: KeptKind,
        key: tuple[Hashable, ...],
        compute: Callable[[], T],
        measure: Callable[[T], int],
    ) -> T:
        name = reading_name(kind, key)
        memory = self.cache.readings
        if name is None or memory is None:
            return self._kept(kind, name, key, compute)
        found = memory.get(name, _ABSENT)
        if found is not _ABSENT:
            value: T = found
            return value
        value = self._kept(kind, name, key, compute)
        memory.put(name, value, measure(value) + len(name))
        return value

    def _kept(
        self,
        kind: KeptKind,
        name: str | None,
        key: tuple[Hashable, ...],
        compute: Callable[[], T],
    ) -> T:
        if self.store is None or name is None:
            return compute()
        kept_as = name
        found = self.store.load_reading(kept_as, lambda text: _decoded(kind, kept_as, text, key))
        if found is not None:
            value: T = found
            return value
        value = compute()
        self.store.save_reading(name, json.dumps({"reading": name, "value": kind.encode(value)}))
        return value


def reading_name(kind: KeptKind, key: tuple[Hashable, ...]) -> str | None:
    """The name a reading is kept under: a digest of the format, the kind and its code,
    the text's digest and the other inputs; ``None`` when it is not kept (a short or a
    very long text, code that cannot be read)."""
    text, rest = key[1], key[2:]
    if not isinstance(text, str) or not MIN_TEXT_CHARS <= len(text) <= MAX_TEXT_CHARS:
        return None
    code = _code_digest(kind.modules)
    if code is None:
        return None
    inputs = json.dumps([FORMAT, kind.name, code, text_digest(text), list(rest)], default=repr)
    return f"{kind.name}-{hashlib.sha256(inputs.encode()).hexdigest()[:40]}"


def _decoded(kind: KeptKind, name: str, content: str, key: tuple[Hashable, ...]) -> Any:
    """The value a reading's file holds, if it is a reading of ``key`` (else ``None``)."""
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("reading") != name or "value" not in data:
        return None
    value = kind.decode(data["value"])
    return value if value is not None and kind.check(value, key) else None


@lru_cache(maxsize=32)
def _code_digest(modules: tuple[str, ...]) -> str | None:
    """A digest of the source of ``modules``, or ``None`` when one cannot be read (an
    install without sources): that kind is then not kept."""
    digest = hashlib.sha256()
    for module in modules:
        try:
            digest.update(inspect.getsource(importlib.import_module(module)).encode())
        except (OSError, TypeError) as exc:
            logger.info("readings of %s are not kept: its source cannot be read (%s)", module, exc)
            return None
    return digest.hexdigest()
