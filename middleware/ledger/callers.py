"""Who an answer is billed to beside its session: the caller, as a digest of the API key
its request carried (never the key), and the tags a client puts on its requests
(``x-chatcli-tags: team=infra, project=x``), bounded in count and length."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping

from middleware.logs import IntervalLog

logger = logging.getLogger(__name__)

#: The request header that tags a request.
TAGS_HEADER = "x-chatcli-tags"
#: Tags kept of one request, at most; characters of a tag's name and of its value.
MAX_TAGS = 8
MAX_TAG_NAME = 64
MAX_TAG_VALUE = 128
#: Hex digits of the caller's digest: 64 bits, enough to tell a team's keys apart.
CALLER_DIGITS = 16

_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_log = IntervalLog(logger)


def caller_of(headers: Mapping[str, str], query: Mapping[str, str] | None = None) -> str | None:
    """A digest of the credential a request carries (``headers`` with lower-case names):
    Anthropic's ``x-api-key``, a bearer token (OpenAI, Claude Code's sign-in), Google's
    ``x-goog-api-key`` or ``?key=``; ``None`` if it carries none."""
    key = headers.get("x-api-key") or headers.get("x-goog-api-key")
    if not key:
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            key = credentials.strip()
    if not key and query is not None:
        key = query.get("key")
    if not key:
        return None
    digest = hashlib.sha256(b"chatcli-caller\0" + key.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:CALLER_DIGITS]


def tags_of(value: str | None) -> tuple[tuple[str, str], ...]:
    """The ``name=value`` pairs of a tags header, in order, the first of a name kept:
    a name of letters, digits, ``_ . -`` (64 at most), a value of printable characters
    (128 at most, cut); :data:`MAX_TAGS` at most. What is not a pair is left out, and
    said in the log once per interval."""
    if not value:
        return ()
    kept: dict[str, str] = {}
    refused = 0
    for part in value.split(","):
        name, equals, tag = part.partition("=")
        name, tag = name.strip(), tag.strip()
        if not equals or not _NAME.fullmatch(name) or len(name) > MAX_TAG_NAME:
            refused += bool(part.strip())
            continue
        tag = "".join(c for c in tag if c.isprintable())[:MAX_TAG_VALUE]
        if name in kept:
            continue
        if len(kept) == MAX_TAGS:
            refused += 1
            continue
        kept[name] = tag
    if refused:
        _log(
            logging.WARNING,
            "tags",
            "%d tags of a request's %s header were left out: a tag "
            "is name=value, the name of letters, digits, _ . - (%d at most), %d tags a "
            "request",
            refused,
            TAGS_HEADER,
            MAX_TAG_NAME,
            MAX_TAGS,
        )
    return tuple(kept.items())
