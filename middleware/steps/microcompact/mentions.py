"""What a summary keeps of a result: the distinctive tokens it mentions and its error lines.

A distinctive token (an identifier, a path, a version, an error code; not a plain word) is
what the model is likely to refer to next. The replay's retention measure
(:mod:`middleware.replay.references`) counts references with the same definition, so a
summary that keeps a token is credited for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_ERROR_LINE = re.compile(r"(error|exception|traceback|failed|fatal|panic)", re.IGNORECASE)
#: A token, with the start of a path it may have (``/``, ``~/``, ``./``, ``../``): the model
#: must be able to open the file a summary names.
_CANDIDATE = re.compile(r"(?:~/|\.{1,2}/|/)?[A-Za-z0-9_][A-Za-z0-9_.:/\-]*[A-Za-z0-9_]")
_CAMEL = re.compile(r"[a-z][A-Z]")
_LETTER = re.compile(r"[A-Za-z]")
_MARK = re.compile(r"[0-9_./:]")
_VERSION = re.compile(r"^\d+(\.\d+){2,}$")


def iter_distinctive(text: str) -> Iterator[str]:
    """Distinctive tokens of ``text`` in order of appearance (repeats included): at least
    3 characters with a letter and a digit, ``_``, ``.``, ``/``, ``:`` or an inner capital,
    and dotted numbers (versions, addresses). Plain words and plain numbers are not
    distinctive. A path keeps its start (``/etc/x.conf``, ``~/a.py``, ``./run.sh``).
    ``path.py:17`` also yields ``path.py``, as grep output writes it."""
    for match in _CANDIDATE.finditer(text):
        candidate = match.group()
        if _distinctive(candidate):
            yield candidate
        if ":" in candidate:
            yield from (part for part in candidate.split(":") if _distinctive(part))


def distinctive_tokens(text: str) -> set[str]:
    """The set of :func:`iter_distinctive` tokens of ``text``."""
    return set(iter_distinctive(text))


def _distinctive(token: str) -> bool:
    if len(token) < 3:
        return False
    if _LETTER.search(token) is None:
        return _VERSION.match(token) is not None
    return _MARK.search(token) is not None or _CAMEL.search(token) is not None


def mentions(text: str, limit: int) -> list[str]:
    """The first ``limit`` distinct distinctive tokens of the result (paths, identifiers,
    versions), in order of appearance: what the model is likely to refer to next."""
    seen: dict[str, None] = {}
    if limit > 0:
        for token in iter_distinctive(text):
            seen.setdefault(token, None)
            if len(seen) >= limit:
                break
    return list(seen)


def error_lines(text: str, limit: int) -> list[str]:
    """The first ``limit`` lines that report an error, stripped and clipped to 200 chars."""
    out: list[str] = []
    for line in text.splitlines():
        if limit <= len(out):
            break
        if _ERROR_LINE.search(line):
            out.append(line.strip()[:200])
    return out
