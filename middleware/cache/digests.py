"""Digests of long texts, worked out once per text within a request.

A spilled result is named by the SHA-256 of its text, and its readings are kept under a
name digested from it (:mod:`.kept`): four digests of the same text per request when the
text-keyed cache has let the text go. Inside :func:`request_scope` (one pipeline call),
the digest of a text object is remembered by identity for the rest of the call; the scope
holds the text, so the identity cannot be reused meanwhile. Outside a scope (another
thread, a caller of the functions that use it), each call digests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: Texts shorter than this are digested each time: the memo would cost about as much.
MIN_REMEMBERED_CHARS = 1_024

_remembered: ContextVar[dict[int, tuple[str, str]] | None] = ContextVar(
    "middleware_text_digests", default=None
)


def text_digest(text: str) -> str:
    """The SHA-256 of ``text`` (UTF-8, lone surrogates kept), in hex."""
    memo = _remembered.get()
    if memo is None or len(text) < MIN_REMEMBERED_CHARS:
        return _digest(text)
    found = memo.get(id(text))
    if found is not None and found[0] is text:
        return found[1]
    digest = _digest(text)
    memo[id(text)] = (text, digest)
    return digest


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@contextmanager
def request_scope() -> Iterator[None]:
    """Remember the digests worked out in this context until the block ends (nested
    scopes share the outer one's)."""
    if _remembered.get() is not None:
        yield
        return
    token = _remembered.set({})
    try:
        yield
    finally:
        _remembered.reset(token)
