"""What ``process()`` may be given, read as a plain history and given back in its shape.

A caller hands over a message list, or a whole request body (Anthropic ``{system,
messages, ...}``, Chat ``{messages, ...}``, Responses ``{input, instructions, ...}``), and
its elements may be the official SDKs' pydantic objects (an OpenAI ``ChatCompletionMessage``
appended to the history, Anthropic ``TextBlock``\\ s in a message's content). They are read
as the SDK itself would send them (``model_dump(exclude_unset=True, mode="json",
by_alias=True)``), without touching the caller's objects; a message no step changed comes
back as the caller's own object, and a body comes back as a body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from middleware.errors import HistoryError
from middleware.formats.base import Codec
from middleware.formats.bodies import RequestBody, body_in, history_fields, read_body
from middleware.formats.structure import MAX_DEPTH


@dataclass(frozen=True)
class Request:
    """What ``process()`` was given: the history as plain JSON data, and how to give the
    result back in the shape it came in."""

    #: The history, plain dicts and lists (SDK objects dumped).
    history: list[Any]
    #: The caller's own element for each element of ``history``.
    originals: list[Any]
    body: RequestBody | None
    #: The format to use: as given, else what the body's key says, else ``auto``.
    format: str
    #: Why the body chose the format, when it did.
    format_source: str | None
    continuation: bool
    #: The format's codec, when the caller had it (a proxy route's: :func:`wire_request`);
    #: ``None``: looked up by :attr:`format`.
    codec: Codec | None = None

    @property
    def text_input(self) -> bool:
        """A Responses body whose input is plain text: there is no history to clean."""
        return self.body is not None and isinstance(self.body.history, str)

    def output(self, messages: list[Any]) -> tuple[list[Any], Any]:
        """The cleaned ``messages`` with each element no step changed replaced by the
        caller's own, and the value in the shape the caller gave (a list, or the body)."""
        by_identity = {
            id(plain): original
            for plain, original in zip(self.history, self.originals, strict=True)
        }
        restored = [by_identity.get(id(item), item) for item in messages]
        if self.body is None:
            return restored, restored
        return restored, self.body.with_history(restored)


def read_request(
    value: Any,
    format: str | Codec = "auto",
    *,
    continuation: bool = False,
    known: Callable[[Sequence[Any]], list[bool]] | None = None,
) -> Request:
    """Read what ``process()`` was given. ``known(items)`` says which elements are
    messages seen before as plain JSON data, which are then not walked for SDK objects
    again. ``format`` may be the codec itself (a host that holds one): it then goes with
    the request, and no format is looked up by name.

    :raises HistoryError: ``value`` is neither a message list nor a request body.
    """
    codec = format if isinstance(format, Codec) else None
    format = codec.name if codec is not None else str(format)
    body = None
    if isinstance(value, Mapping):
        body = body_in(value, codec) if codec is not None else read_body(value, format)
        if body is None:
            fields = history_fields()
            raise HistoryError(
                f"expected a list of messages, or a request body with a {fields} field, got "
                f"a mapping with {', '.join(map(repr, list(value)[:5])) or 'no keys'}"
            )
        source = f"the request body's {body.key!r} list"
        fmt = body.format_hint if format == "auto" and body.format_hint else format
        continuation = continuation or body.continues_stored_state
        if isinstance(body.history, str):
            return Request([], [], body, fmt, source, continuation, codec)
        items = body.history
    else:
        source, fmt, items = None, format, value
    if not isinstance(items, Sequence) or isinstance(items, (str, bytes)):
        raise HistoryError(f"expected a list of messages, got {type(items).__name__}")
    originals = list(items)
    if known is None:
        history = [plain(item) for item in originals]
    else:
        history = [
            item if seen else plain(item)
            for item, seen in zip(originals, known(originals), strict=True)
        ]
    return Request(
        history, originals, body, fmt, source if fmt != format else None, continuation, codec
    )


def wire_request(body: RequestBody, codec: Codec) -> Request:
    """A request body read from the wire (:func:`.bodies.body_in`), in ``codec``'s
    format: plain JSON data already, so no element is walked for SDK objects, and its
    codec goes with it."""
    continuation = body.continues_stored_state
    if isinstance(body.history, str):  # a Responses input of plain text
        return Request([], [], body, codec.name, None, continuation, codec)
    if not isinstance(body.history, list):
        raise HistoryError(f"expected a list of messages, got {type(body.history).__name__}")
    history = list(body.history)
    return Request(history, history, body, codec.name, None, continuation, codec)


#: Types ``plain`` returns as they are without looking further.
_LEAVES = frozenset({str, int, float, bool, type(None)})


def plain(value: Any, depth: int = 0) -> Any:
    """``value`` with every SDK object in it dumped as the SDK sends it; containers are
    copied only where something inside them was converted."""
    if depth > MAX_DEPTH:
        return value  # the structural check at parse time says where and why
    kind = type(value)
    if kind in _LEAVES:  # no SDK object is one of these, or inside one
        return value
    if kind is not dict and kind is not list:  # those have no model_dump of their own
        dump = getattr(value, "model_dump", None)
        if callable(dump) and not isinstance(value, type):
            return plain(_dumped(value, dump), depth + 1)
    if isinstance(value, dict):
        converted = {key: plain(item, depth + 1) for key, item in value.items()}
        same = all(converted[key] is item for key, item in value.items())
        return value if same else converted
    if isinstance(value, list):
        items = [plain(item, depth + 1) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def _dumped(value: Any, dump: Any) -> Any:
    try:
        return dump(
            exclude_unset=True,
            mode="json",
            by_alias=True,
            exclude=getattr(value, "__api_exclude__", None),
        )
    except TypeError:  # a model_dump() that is not pydantic's
        return dump()
