"""Request bodies: where a provider request keeps its history, and how to put a cleaned
one back while every other field (``system``, ``tools``, ``metadata``, unknown ones) stays
exactly as it was."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from middleware.errors import FormatError

#: The body key holding the history, per wire format.
HISTORY_KEYS = {"anthropic": "messages", "openai": "messages", "responses": "input"}


@dataclass(frozen=True)
class RequestBody:
    """A request body and its history."""

    document: Mapping[str, Any]
    #: ``messages`` or ``input``.
    key: str
    #: The history as the body carries it (a Responses ``input`` may be a plain string).
    history: Any
    #: The wire format the body's key says (``None``: ``messages``, Anthropic or Chat).
    format_hint: str | None

    @property
    def continues_stored_state(self) -> bool:
        """Whether the provider holds earlier turns this body does not repeat (a Responses
        ``previous_response_id`` or ``conversation``): outputs may then answer calls that
        are not in the body, and must not be taken for orphans."""
        return any(
            self.document.get(k) is not None for k in ("previous_response_id", "conversation")
        )

    def with_history(self, history: Any) -> dict[str, Any]:
        """The body with ``history`` in place of its own, every other field untouched."""
        return {**self.document, self.key: history}


def read_body(document: Any, format: str = "auto") -> RequestBody | None:
    """The history of a request body, or ``None`` when ``document`` is not a mapping with
    a ``messages`` or ``input`` field.

    :param format: the wire format if known (the route a proxy received it on), else
        ``auto``: ``input`` means Responses, ``messages`` Anthropic or Chat.
    :raises FormatError: the body's key contradicts the format given.
    """
    if not isinstance(document, Mapping):
        return None
    if format != "auto":
        key = HISTORY_KEYS.get(format)
        if key is None:
            raise FormatError(f"unknown format {format!r}")
        if key not in document:
            return None
        return RequestBody(document, key, document[key], format)
    for key, hint in (("messages", None), ("input", "responses")):
        if key in document:
            return RequestBody(document, key, document[key], hint)
    return None
