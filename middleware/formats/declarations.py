"""What a wire format declares beside its codec: where its results go, its provider (error
shape, how its requests are recognised), its routes, what its answers report, and the
tools and calls an integration reads in its answers. :class:`.base.Codec` carries these
as its declarations; the values here are what the declarations are made of."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Literal, NamedTuple


class ResultPlacement(Enum):
    """Where a wire format wants the results answering an assistant turn."""

    #: As blocks at the start of the user message right after the turn, one message for
    #: all of them (Anthropic Messages).
    NEXT_MESSAGE = "next_message"
    #: One message per result, right after the assistant message that made the call
    #: (OpenAI Chat Completions).
    AFTER_CALL = "after_call"
    #: As items after the turn's items, before the next input item (OpenAI Responses).
    AFTER_TURN = "after_turn"


#: What the proxy answers by itself, in the shape of the provider the client talks to.
ErrorKind = Literal[
    "too_large",
    "not_processed",
    "upstream_unreachable",
    "not_found",
    "forbidden",
    "request_timeout",
    "overloaded",
    "bad_request",
    "not_json",
]


class Provider(ABC):
    """The API a wire format belongs to (several formats may share one): the shape of
    its errors, and how a request for it is recognised when it is on no model route."""

    #: The name the proxy's settings and metrics use (``proxy.upstreams.<name>``).
    name: ClassVar[str]
    #: The base URL of its own API: where the proxy forwards its requests unless
    #: ``proxy.upstreams`` names another.
    default_upstream: ClassVar[str]
    #: The path prefixes of its API as its clients and SDKs call it (``/v1/``): the only
    #: paths the proxy relays, so that nothing else an upstream serves (a web page) is
    #: served under the proxy's own origin, beside its console.
    api_prefixes: ClassVar[tuple[str, ...]]

    @abstractmethod
    def error_document(self, kind: ErrorKind, message: str) -> dict[str, Any]:
        """The JSON error its SDKs parse, so they raise their usual exception."""

    @abstractmethod
    def claims(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        """Whether a request with these headers (names in lower case) and query
        parameters is for it."""


class UsageCounts(NamedTuple):
    """Tokens an answer's usage reports, by how they are billed (the ledger prices them):
    ``input`` neither read from nor written to the cache."""

    input: int = 0
    cache_read: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    output: int = 0


class ToolSpec(NamedTuple):
    """A tool this product offers the model itself (the integrations' ``recall``)."""

    name: str
    description: str
    #: Its arguments' JSON Schema.
    parameters: dict[str, Any]


class AnswerCall(NamedTuple):
    """A tool call in a model's answer."""

    id: str
    name: str
    arguments: dict[str, Any]


class Route(NamedTuple):
    """A request path of a codec's provider whose body the proxy cleans or whose answer
    it bills: the proxy's own path, or the ending of a path an SDK client sends to
    (wrapped by :func:`wrap`). A proxy path may hold ``{name}`` segments standing for any
    text without a ``/`` (Gemini's ``/v1beta/models/{model}:generateContent``)."""

    path: str
    #: Whether the answer is billed as a model call (a token count is not).
    billed: bool = True
    #: Whether the answer is always streamed, whatever the body says (Gemini's
    #: ``:streamGenerateContent``).
    streamed: bool = False
    #: Whether the body's history is cleaned; ``False``: the body goes as it came and only
    #: its answer is billed (a compaction of the history, an embedding, a completion of a
    #: prompt).
    cleaned: bool = True


@dataclass(frozen=True)
class Violation:
    """One broken pairing rule of a provider: the message it is found at, a short code and
    the reason, modelled on the provider's own 400 error text."""

    #: Index of the message (or Responses item) in the history.
    index: int
    #: ``missing_result``, ``orphan_result``, ``duplicate_id``, ``duplicate_result``,
    #: ``result_not_first``, ``displaced_result``, ``empty_id``, ``empty_name``,
    #: ``invalid_id`` or ``reasoning_without_item``.
    code: str
    reason: str


def blank_name(name: Any) -> bool:
    """A missing, empty or blank tool name (the codecs refuse other types)."""
    return name is None or not name.strip()


def empty_name_reason(where: str) -> str:
    """OpenAI's words for a call without a name."""
    return (
        f"Invalid '{where}.name': empty string. Expected a string with minimum length 1, "
        "but got an empty string instead."
    )
