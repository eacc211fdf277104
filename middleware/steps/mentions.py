"""What a summary keeps of a result: the distinctive tokens it mentions (its error lines are
:func:`middleware.steps.line_kinds.error_lines`).

A distinctive token (an identifier, a path, a version, an error code; not a plain word) is
what the model is likely to refer to next. The replay's retention measure
(:mod:`middleware.replay.references`) counts references with the same definition, so a
summary that keeps a token is credited for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

#: A token, with the start of a path it may have (``/``, ``~/``, ``./``, ``../``): the model
#: must be able to open the file a summary names.
_CANDIDATE = re.compile(r"(?:~/|\.{1,2}/|/)?[A-Za-z0-9_][A-Za-z0-9_.:/\-]*[A-Za-z0-9_]")
#: A character no candidate contains: text is cut there into chunks.
_SEPARATOR = re.compile(r"[^A-Za-z0-9_.:/~\-]")
#: Characters tokenised at once (a candidate list per chunk, not a match object per token).
CHUNK_CHARS = 16_384
_CAMEL = re.compile(r"[a-z][A-Z]")
_VERSION = re.compile(r"^\d+(\.\d+){2,}$")


def iter_distinctive(text: str) -> Iterator[str]:
    """Distinctive tokens of ``text`` in order of appearance (repeats included): at least
    3 characters with a letter and a digit, ``_``, ``.``, ``/``, ``:`` or an inner capital,
    and dotted numbers (versions, addresses). Plain words and plain numbers are not
    distinctive. A path keeps its start (``/etc/x.conf``, ``~/a.py``, ``./run.sh``).
    ``path.py:17`` also yields ``path.py``, as grep output writes it."""
    for chunk in _chunks(text):  # lazy by chunk: mentions() stops at its limit
        yield from tokens_of(chunk)


def distinctive_tokens(text: str) -> set[str]:
    """The set of :func:`iter_distinctive` tokens of ``text``."""
    if len(text) <= CHUNK_CHARS:
        return set(tokens_of(text))
    return set(iter_distinctive(text))


def tokens_of(text: str) -> list[str]:
    """:func:`iter_distinctive` of a short text (a line, a chunk), as a list."""
    return [token for candidate in _CANDIDATE.findall(text) for token in _reading(candidate)]


@lru_cache(maxsize=4_096)
def _reading(candidate: str) -> tuple[str, ...]:
    """The distinctive tokens one candidate yields (itself, and the parts of a ``:``-joined
    one): none for most, which are plain words. Kept for the candidates met last: the same
    words and names recur all through a text and from one result to the next."""
    if candidate.isalpha():  # a word: most tokens; distinctive only in camelCase
        if (
            len(candidate) >= 3
            and not (candidate.islower() or candidate.isupper() or candidate[1:].islower())
            and _CAMEL.search(candidate) is not None
        ):
            return (candidate,)
        return ()
    found: tuple[str, ...] = (candidate,) if _distinctive(candidate) else ()
    if ":" in candidate:
        found += tuple(part for part in candidate.split(":") if _distinctive(part))
    return found


def cut_between_tokens(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` characters, back to the last character no token
    contains when the cut would fall inside a token (a clipped line shows no half token,
    which would read as another name). A single token longer than ``width`` is cut."""
    if len(text) <= width:
        return text
    if width <= 0:
        return ""
    if _SEPARATOR.match(text, width) or _SEPARATOR.match(text, width - 1):
        return text[:width].rstrip()
    inside = _SEPARATOR.search(text[width - 1 :: -1])
    return text[:width] if inside is None else text[: width - inside.start()].rstrip()


def _chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    """``text`` in pieces of about ``size`` characters, each cut at a character no token
    contains, so tokens are found in the pieces exactly as in the whole."""
    start = 0
    while len(text) - start > size:
        cut = _SEPARATOR.search(text, start + size)
        if cut is None:
            break
        yield text[start : cut.start()]
        start = cut.start()
    yield text[start:]


def _distinctive(token: str) -> bool:
    # Tokens are ASCII letters, digits and ``_.:/-~`` (``_CANDIDATE``), so string methods
    # answer what a regex would, without one per token: most tokens are plain words.
    if len(token) < 3:
        return False
    if token.upper() == token.lower():  # no letter
        return _VERSION.match(token) is not None
    if not token.replace("-", "").isalpha():  # a digit or one of _ . / : ~
        return True
    # Letters and hyphens only: distinctive with an inner capital (camelCase).
    if token.islower() or token.isupper() or token[1:].islower():
        return False
    return _CAMEL.search(token) is not None


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
