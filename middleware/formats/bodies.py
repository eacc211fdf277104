"""Request bodies: where a provider request keeps its history, and how to put a cleaned
one back while every other field (``system``, ``tools``, ``metadata``, unknown ones) stays
exactly as it was."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from middleware.formats.base import Codec
from middleware.formats.registry import CODECS, get_codec


def _history_keys() -> dict[str, str | None]:
    keys: dict[str, str | None] = {}
    for codec in CODECS.values():
        key = codec.history_key
        keys[key] = None if key in keys else codec.name
    return keys


#: The body fields holding a history, and the format each says (``None``: several
#: formats keep their history there, Anthropic's and Chat's ``messages``).
HISTORY_KEYS = _history_keys()
#: Body fields that say the provider holds earlier turns the body does not repeat.
STORED_STATE_KEYS = tuple(dict.fromkeys(k for c in CODECS.values() for k in c.stored_state_keys))


@dataclass(frozen=True)
class RequestBody:
    """A request body and its history."""

    document: Mapping[str, Any]
    #: The field holding the history (:data:`HISTORY_KEYS`).
    key: str
    #: The history as the body carries it (a Responses ``input`` may be a plain string).
    history: Any
    #: The wire format the body's key says (``None``: a key several formats use).
    format_hint: str | None

    @property
    def continues_stored_state(self) -> bool:
        """Whether the provider holds earlier turns this body does not repeat (a Responses
        ``previous_response_id`` or ``conversation``): outputs may then answer calls that
        are not in the body, and must not be taken for orphans."""
        return any(self.document.get(k) is not None for k in STORED_STATE_KEYS)

    def with_history(self, history: Any) -> dict[str, Any]:
        """The body with ``history`` in place of its own, every other field untouched."""
        return {**self.document, self.key: history}


def read_body(document: Any, format: str = "auto") -> RequestBody | None:
    """The history of a request body, or ``None`` when ``document`` is not a mapping with
    a history field (:data:`HISTORY_KEYS`).

    :param format: the wire format if known (the route a proxy received it on), else
        ``auto``: the field says the format when only one format uses it (``input``:
        Responses; ``messages``: Anthropic or Chat, told apart by the messages).
    :raises FormatError: ``format`` names no format.
    """
    if not isinstance(document, Mapping):
        return None
    if format != "auto":
        return body_in(document, get_codec(format))
    for key, hint in HISTORY_KEYS.items():
        if key in document:
            return RequestBody(document, key, document[key], hint)
    return None


def body_in(document: Any, codec: Codec) -> RequestBody | None:
    """The history of a request body in ``codec``'s format (the route it came on says
    so), or ``None`` when ``document`` is not a mapping with that format's history field."""
    if not isinstance(document, Mapping) or codec.history_key not in document:
        return None
    key = codec.history_key
    return RequestBody(document, key, document[key], codec.name)


def history_fields() -> str:
    """The fields of a request body that hold a history, as a sentence says them
    (``'messages', 'contents' or 'input'``)."""
    *others, last = map(repr, HISTORY_KEYS)
    return f"{', '.join(others)} or {last}" if others else last
