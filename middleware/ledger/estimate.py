"""What a request would have cost without the middleware, from what it was billed.

The provider bills the cleaned request; the unprocessed one was never sent. Its cost is
estimated from the bill and the difference between the two requests only, so what the
estimate gets wrong is the difference, never the bill:

* its prompt holds the characters the steps removed, at the tokens per character the
  provider counted for the cleaned body;
* it reads from the prompt cache what the cleaned request read, plus what the replay cost
  model (:mod:`middleware.replay.costs`) says the difference in the two requests' cached
  prefixes is: each request shares with the previous one of its session the messages
  before the first that changed (a rewrite of an old message by the steps shortens the
  cleaned request's shared prefix, not the unprocessed one's);
* the rest of its prompt is written to the cache (Anthropic; the input after the last
  cache breakpoint stays as billed) or is plain input (OpenAI, which bills no writes);
* a request that read nothing from the cache (the first of a session, or one after the
  cache expired) would have read nothing either; one that neither read nor wrote (a
  provider or a client that does not cache) would not have cached either; unless the
  session's cache is warm (its previous request within the cache's lifetime, and an
  answer of the session read from it): then a request read nothing because the requests
  before it went cleaned and it does not (a compaction of the history forwarded as it
  came), and unprocessed it would have read the prefix it shares with them.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from middleware.cache.messages import exact_copy, message_mark
from middleware.formats import jsonio
from middleware.ledger.usage import Usage

#: Tokens per character the provider may be taken to count, at least and at most (a body
#: of pictures counts few tokens per character of base64; a CJK text, about one each).
TOKENS_PER_CHAR = (0.01, 1.5)


#: The hash part of a message mark (its length is kept apart).
_HASH = 0xFFFF_FFFF_FFFF_FFFF
#: A key that marks where a prompt is cached, not what it says: the providers' caches
#: match the prompt without it (a breakpoint moved to the newest message leaves the
#: message it left as cached as it was).
MARKER = "cache_control"


@dataclass(frozen=True)
class Footprint:
    """A request's messages as the cost model sees them: the hash and the length of each
    message's exact copy without its cache markers (:data:`MARKER`), in order (16 bytes a
    message, not the messages)."""

    hashes: array[int]
    chars: array[int]
    #: The messages holding a cache marker (the prompt after the last is not cached, by
    #: the client's choice; a client sets a few).
    marked: tuple[int, ...] = ()

    @property
    def last_marked(self) -> int:
        """The last message holding a cache marker, -1 if none does."""
        return self.marked[-1] if self.marked else -1

    @property
    def total(self) -> int:
        return sum(self.chars)

    def shared(self, before: Footprint) -> int:
        """Characters of the messages this request shares with ``before`` from its start."""
        count = 0
        pairs = zip(self.hashes, before.hashes, self.chars, before.chars, strict=False)
        for mine, theirs, size, their_size in pairs:
            if mine != theirs or size != their_size:
                break
            count += 1
        return sum(self.chars[:count])


def footprint(
    history: Sequence[Any],
    like: tuple[Sequence[Any], Footprint] | None = None,
    *,
    marks: Sequence[int] | None = None,
) -> Footprint:
    """The :class:`Footprint` of ``history``: each message known by the length and hash
    of its exact copy (:func:`~middleware.cache.messages.message_mark`), taken without its
    cache markers. A message that is the very object of one in ``like`` (a history and its
    footprint: the request before its steps ran) is not copied again, nor one ``marks``
    (the pipeline's, of ``history``) already gives, unless it holds a marker."""
    if marks is not None and len(marks) != len(history):
        marks = None
    known: dict[int, tuple[int, int, bool]] = {}
    if like is not None:
        messages, measured = like
        flagged = set(measured.marked)
        known = {
            id(m): (h, c, i in flagged)
            for i, (m, h, c) in enumerate(
                zip(messages, measured.hashes, measured.chars, strict=True)
            )
        }
    hashes, chars = array("Q"), array("q")
    marked: list[int] = []
    for index, message in enumerate(history):
        entry = known.get(id(message))
        if entry is None and marks is not None and not _marked(message):
            entry = (marks[index] & _HASH, marks[index] >> 64, False)
        if entry is None:
            mark, has_marker = _serialised(message)
            entry = (mark & _HASH, mark >> 64, has_marker)
        hashes.append(entry[0])
        chars.append(entry[1])
        if entry[2]:
            marked.append(index)
    return Footprint(hashes, chars, tuple(marked))


def _serialised(message: Any) -> tuple[int, bool]:
    """The mark of the message's exact copy without its cache markers, as the pipeline
    marks a message (so a message marked in one request and not in the next is known for
    the same), and whether it had one."""
    marked = _marked(message)
    try:
        copy = exact_copy(_unmarked(message) if marked else message)
    except Exception:  # a value pickle refuses: its JSON stands in for it
        copy = jsonio.wire(message)
    return message_mark(copy), marked


def _marked(message: Any) -> bool:
    """Whether a cache marker is on the message, one of its blocks, or a block of one of
    them (a tool result's parts): where the providers take one. Looked for there, not in
    the whole JSON (a search of every byte costs as much as writing it)."""
    if not isinstance(message, dict):
        return False
    if MARKER in message:
        return True
    content = message.get("content")
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict):
            if MARKER in block:
                return True
            inner = block.get("content")
            if isinstance(inner, list) and any(isinstance(b, dict) and MARKER in b for b in inner):
                return True
    return False


def _unmarked(value: Any) -> Any:
    """``value`` without :data:`MARKER` keys, at any depth."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != MARKER}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def tokens_per_char(billed: Usage, body_chars: int) -> float:
    """Tokens the provider counted per character of the forwarded body (within
    :data:`TOKENS_PER_CHAR`; a quarter when the body's size is unknown)."""
    if not body_chars:
        return 0.25
    low, high = TOKENS_PER_CHAR
    return min(max(billed.prompt / body_chars, low), high)


def without_middleware(
    billed: Usage,
    *,
    writes: bool,
    raw: Footprint,
    cleaned: Footprint,
    before: tuple[Footprint, Footprint] | None,
    body_chars: int,
    warm: bool = False,
) -> Usage:
    """The usage the unprocessed request would have been billed (see the module's text).

    :param writes: whether the provider bills cache writes (Anthropic) or not (OpenAI).
    :param raw: the request as the client sent it; ``cleaned``: as it was forwarded.
    :param before: the previous request of the session, unprocessed and cleaned.
    :param body_chars: characters of the forwarded body (the prompt the provider counted).
    :param warm: the session's cache is warm (see the module's text).
    """
    if raw == cleaned and (before is None or before[0] == before[1]):
        return billed
    per_char = tokens_per_char(billed, body_chars)
    prompt = max(0, billed.prompt + round(per_char * (raw.total - cleaned.total)))
    if billed.cache_read == 0 and billed.cache_write == 0 and not warm:
        return Usage(input=prompt, output=billed.output)
    read = billed.cache_read
    if (read or warm) and before is not None:
        read += round(per_char * (raw.shared(before[0]) - cleaned.shared(before[1])))
    if not writes:
        read = min(max(read, 0), prompt)
        return Usage(input=prompt - read, cache_read=read, output=billed.output)
    tail = min(billed.input, prompt)
    read = min(max(read, 0), prompt - tail)
    written = prompt - tail - read
    hour = round(written * billed.cache_write_1h / billed.cache_write) if billed.cache_write else 0
    return Usage(tail, read, written - hour, hour, billed.output)


def expected_read(
    billed: Usage,
    *,
    writes: bool,
    cleaned: Footprint,
    before: Footprint | None,
    body_chars: int,
) -> int:
    """Tokens the request should have read from the cache by the cost model the schedule
    decides with: all of its prompt but the messages after the first one that changed
    since the previous request of the session (``before``, cleaned; ``None``: none, or
    too long ago for the cache to hold it), and, where writes are billed, but the
    messages the client put after its last cache breakpoint."""
    if before is None or not body_chars:
        return 0
    per_char = tokens_per_char(billed, body_chars)
    unshared = round(per_char * (cleaned.total - cleaned.shared(before)))
    cacheable = billed.prompt
    if writes:  # Anthropic caches up to the last breakpoint the client set
        cacheable -= round(per_char * sum(cleaned.chars[cleaned.last_marked + 1 :]))
    return max(0, min(billed.prompt - unshared, cacheable))
