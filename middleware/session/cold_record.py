"""A session's cold-cache record: the moves it holds, where it is kept, and how it is read.

The record is text other processes write too (see :mod:`middleware.session.cold_cache`), so
it is read as untrusted: bounded in size and digits, every move and time checked, and
anything else is a :data:`UNREADABLE` error that the session takes as no record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import NamedTuple, Protocol, runtime_checkable

#: The largest record read or written. A move takes about 30 bytes, and a session makes
#: one when its cache is cold and a turn is due: a real record holds a few kilobytes. One
#: larger is not read at all.
MAX_RECORD_BYTES = 1 << 20
#: The most digits of a number in a record (a count, or a time in seconds).
MAX_DIGITS = 20
#: What a record that cannot be read fails with (a :class:`SpillError` is an OSError;
#: RecursionError: arrays nested too deep for the parser).
UNREADABLE = (OSError, ValueError, TypeError, KeyError, OverflowError, RecursionError)


class ColdMove(NamedTuple):
    """A move made on a cold cache: the turn the boundary moved to, and what identifies
    the conversation at that point: the number of messages before that turn and a digest
    of the ids of the tool calls among them (which a cache marker moving from message to
    message leaves alone)."""

    turn: int
    messages: int
    calls: str


@runtime_checkable
class RecordStore(Protocol):
    """Where a session's record is kept (its local spill workspace), which other
    processes may write too."""

    @property
    def record_location(self) -> str:
        """Where the record is, for the messages that name it."""

    def record_stamp(self) -> object:
        """What changes whenever the record is written (``None``: there is none); cheap,
        asked before every request."""

    def load_record(self, max_bytes: int) -> str | None:
        """The record, or ``None``: there is none.

        :raises OSError: it cannot be read, is not safe to read, or holds more than
            ``max_bytes`` (then none of it is read).
        """

    def record_lock(
        self, *, create: bool = True, until: float | None = None
    ) -> AbstractContextManager[bool]:
        """Held, by every process that writes the record, while it is read, merged and
        written; gives whether it may be written (with ``create=False``, only where the
        session keeps something anyway).

        :raises OSError: the lock could not be taken (by ``until``, a
            ``time.monotonic()``, if given).
        """

    def save_record(self, content: str) -> None:
        """Keep ``content`` as the record, written whole, under :meth:`record_lock`.

        :raises OSError: it could not be written.
        """


def record_text(moved: Sequence[ColdMove], last: float | None) -> str:
    """The record of the moves ``moved`` and the time ``last`` of the last request (ASCII,
    so its length is its size in bytes): what :func:`parse_record` reads back."""
    return json.dumps({"moved": moved, "last": last})


def parse_record(text: str) -> tuple[set[ColdMove], float | None]:
    """The moves and the time of the last request a record holds.

    :raises ValueError: it is not a record (not JSON, numbers that are no count or time,
        NaN, a number of more than :data:`MAX_DIGITS` digits).
    :raises RecursionError: arrays nested too deep to parse.
    """
    record = json.loads(text, parse_int=_small_int, parse_constant=_no_constant)
    if not isinstance(record, dict) or not {"moved", "last"} <= set(record):
        raise ValueError("not an object of 'moved' and 'last'")
    if not isinstance(record["moved"], list):
        raise ValueError(f"'moved' is not a list: {_short(record['moved'])}")
    moved = {_move(move) for move in record["moved"]}
    last = record["last"]
    if last is None:
        return moved, None
    if isinstance(last, bool) or not isinstance(last, (int, float)):
        raise ValueError(f"'last' is not a time: {_short(last)}")
    if not (math.isfinite(last) and last >= 0):
        raise ValueError(f"'last' is not a time: {last!r}")
    return moved, float(last)


def _small_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"a number of {len(digits.lstrip('-')):,} digits")
    return int(digits)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is no number a record holds")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _move(value: object) -> ColdMove:
    if not isinstance(value, list) or len(value) != len(ColdMove._fields):
        raise ValueError(f"not a move: {_short(value)}")
    turn, messages, calls = value
    for count in (turn, messages):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"not a count: {_short(count)}")
    if not isinstance(calls, str):
        raise ValueError(f"not a digest: {_short(calls)}")
    return ColdMove(turn, messages, calls)
