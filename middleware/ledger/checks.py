"""The checks a name, a count or an amount read back passes (from a ledger file line, or a
sums record of its own): what a file edited by hand or cut short holds is refused with
:class:`TypeError`, never summed."""

from __future__ import annotations

import math
import re
from typing import Any

from middleware.ledger.usage import Usage

#: Characters kept of a name the ledger keeps (a session, a model, a price key): clients
#: and upstreams choose them, so a longer one is cut (as session ids are:
#: :data:`middleware.conversations.keys.MAX_ID_CHARS`).
MAX_NAME_CHARS = 256
#: Tokens of one kind one answer may be billed: no context window comes near, so a usage
#: reporting more is not a bill (it is counted as unread), and every sum stays a number
#: JSON and floats can hold.
MAX_TOKENS = 10**12
#: US dollars one answer may cost: a price that makes more (or no finite number) is a
#: mistake in ``ledger.prices``, and the answer is counted in tokens only.
MAX_DOLLARS = 1e9

_SURROGATE = re.compile("[\ud800-\udfff]")
#: The kinds of tokens, in the order :class:`Usage` takes them.
KINDS = tuple(Usage().as_dict())


def name(value: str) -> str:
    """``value`` as the ledger keeps a name: valid Unicode (a lone surrogate, which no
    JSON answer or UTF-8 file can hold, becomes U+FFFD) of :data:`MAX_NAME_CHARS` at most."""
    if len(value) <= MAX_NAME_CHARS and (value.isascii() or not _SURROGATE.search(value)):
        return value  # as most are: read back a line at a time, each name is checked
    return _SURROGATE.sub("\ufffd", value[:MAX_NAME_CHARS])


def usage(value: Any, most: int | None = None) -> Usage:
    """Tokens by kind, each a whole number (at most ``most``)."""
    if not isinstance(value, dict):
        raise TypeError("tokens are a mapping of kinds")
    counts = [value.get(kind, 0) for kind in KINDS]
    for count in counts:
        whole(count, most)
    return Usage(*counts)


def whole(value: Any, most: int | None = None) -> int:
    """A count: a whole number (not a bool), not negative, at most ``most``."""
    if type(value) is not int or value < 0:  # not a bool either
        raise TypeError("counts are whole numbers")
    if most is not None and value > most:
        raise TypeError(f"a count past {most:,} is out of range")
    return value


def count(value: Any, most: int) -> int | None:
    """A count that may be absent (``None``)."""
    return None if value is None else whole(value, most)


def amount(value: Any, most: float) -> float | None:
    """One answer's dollars (``None``: not priced), at most ``most``."""
    if value is None:
        return None
    dollars = total(value)
    if dollars > most:
        raise TypeError(f"an amount of {dollars:.3g} dollars is out of range")
    return dollars


def total(value: Any) -> float:
    """A sum of dollars: a finite number, not negative."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("dollars are a number")
    try:
        dollars = float(value)
    except OverflowError as exc:
        raise TypeError("dollars are a finite number") from exc
    if not math.isfinite(dollars) or dollars < 0:
        raise TypeError("dollars are a finite number, not negative")
    return dollars


def read_time(value: Any) -> float | None:
    """A time of the ledger file (seconds since the epoch), ``None`` if it is none."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        when = float(value)
    except OverflowError:
        return None
    return when if math.isfinite(when) else None


def read_text(value: Any) -> str | None:
    """A name read back (:func:`name`), ``None`` if it is no text."""
    return name(value) if isinstance(value, str) else None
