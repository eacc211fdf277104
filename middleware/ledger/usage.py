"""The tokens a provider billed for one answer, read from the ``usage`` it reports: in a
JSON answer, or across a streamed one (server-sent events), in each wire format.

* Anthropic Messages: ``usage`` of the message (streamed: ``message_start`` carries the
  input and cache fields, ``message_delta`` the output count, and newer API versions repeat
  the input fields there too: the last value of each field is the one billed).
  ``input_tokens`` is input after the last cache breakpoint; ``cache_creation_input_tokens``
  were written to the cache (split by lifetime in ``cache_creation``),
  ``cache_read_input_tokens`` read from it.
* Chat Completions: ``usage`` of the answer (streamed: the last chunk, only when the
  request asked for ``stream_options.include_usage``); ``prompt_tokens`` include
  ``prompt_tokens_details.cached_tokens``.
* Responses: ``usage`` of the response (streamed: in ``response.completed``, or
  ``response.incomplete`` / ``response.failed``); ``input_tokens`` include
  ``input_tokens_details.cached_tokens``.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

#: Bytes of a JSON answer read for its usage at most (an answer is a few KB; a larger one
#: is not a model's answer, or not one worth holding in memory to read).
MAX_ANSWER_BYTES = 4 * 1024 * 1024
#: Bytes of one server-sent event line kept while it arrives (a Responses
#: ``response.completed`` carries the whole answer).
MAX_LINE_BYTES = 8 * 1024 * 1024
#: The streamed events whose data may carry usage, per wire format.
_USAGE_EVENTS = {
    "anthropic": ("message_start", "message_delta"),
    "responses": ("response.completed", "response.incomplete", "response.failed"),
}


@dataclass(frozen=True)
class Usage:
    """Tokens of one answer (or a sum of answers), by how they are billed. ``input`` is
    input neither read from nor written to the cache."""

    input: int = 0
    cache_read: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    output: int = 0

    @property
    def cache_write(self) -> int:
        return self.cache_write_5m + self.cache_write_1h

    @property
    def prompt(self) -> int:
        """Every input token of the request, however billed."""
        return self.input + self.cache_read + self.cache_write

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input + other.input,
            self.cache_read + other.cache_read,
            self.cache_write_5m + other.cache_write_5m,
            self.cache_write_1h + other.cache_write_1h,
            self.output + other.output,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "input": self.input,
            "cache_read": self.cache_read,
            "cache_write_5m": self.cache_write_5m,
            "cache_write_1h": self.cache_write_1h,
            "output": self.output,
        }


def read_usage(fmt: str, usage: Any) -> Usage | None:
    """The :class:`Usage` of a provider's ``usage`` object in wire format ``fmt``, or
    ``None`` if it is not one (absent, ``null``, or of another shape)."""
    if not isinstance(usage, Mapping):
        return None
    if fmt == "anthropic":
        written = _count(usage, "cache_creation_input_tokens")
        split = usage.get("cache_creation")
        hour = _count(split, "ephemeral_1h_input_tokens") if isinstance(split, Mapping) else 0
        hour = min(hour, written)
        return Usage(
            input=_count(usage, "input_tokens"),
            cache_read=_count(usage, "cache_read_input_tokens"),
            cache_write_5m=written - hour,
            cache_write_1h=hour,
            output=_count(usage, "output_tokens"),
        )
    prompt_key, output_key, details_key = (
        ("prompt_tokens", "completion_tokens", "prompt_tokens_details")
        if fmt == "openai"
        else ("input_tokens", "output_tokens", "input_tokens_details")
    )
    if prompt_key not in usage:
        return None
    prompt = _count(usage, prompt_key)
    details = usage.get(details_key)
    cached = min(_count(details, "cached_tokens"), prompt) if isinstance(details, Mapping) else 0
    return Usage(input=prompt - cached, cache_read=cached, output=_count(usage, output_key))


def _count(mapping: Mapping[str, Any], key: str) -> int:
    value = mapping.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class UsageReader:
    """Reads the usage and the model of one answer as its bytes are relayed, chunk by
    chunk, without holding a streamed answer: a JSON answer is read whole at the end (up
    to :data:`MAX_ANSWER_BYTES`), an event stream line by line. A gzip or deflate answer
    is read through a decompressor; another encoding is not read (``usage`` stays
    ``None``)."""

    def __init__(self, fmt: str, content_type: str = "", content_encoding: str = "") -> None:
        self.fmt = fmt
        self.streamed = "event-stream" in content_type.lower()
        encoding = content_encoding.strip().lower()
        self._decoder: Any = None
        self.readable = encoding in ("", "identity", "gzip", "x-gzip", "deflate")
        if encoding in ("gzip", "x-gzip"):
            self._decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._decoder = zlib.decompressobj()
        self._buffer = bytearray()
        self._fields: dict[str, Any] = {}
        self.model: str | None = None
        self._overflow = False

    def feed(self, chunk: bytes) -> None:
        """One more chunk of the answer as it came."""
        if not self.readable or self._overflow:
            return
        if self._decoder is not None:
            try:
                chunk = self._decoder.decompress(chunk)
            except zlib.error as exc:
                logger.info("cannot decompress an answer to read its usage: %s", exc)
                self.readable = False
                return
        self._buffer += chunk
        if self.streamed:
            self._read_lines()
        elif len(self._buffer) > MAX_ANSWER_BYTES:
            self._overflow = True
            self._buffer.clear()

    @property
    def usage(self) -> Usage | None:
        """What the answer reported so far (the whole of it once the answer ended)."""
        if not self.streamed and self._buffer and not self._overflow:
            self._read_document(bytes(self._buffer))
            self._buffer.clear()
        return read_usage(self.fmt, self._fields) if self._fields else None

    def _read_lines(self) -> None:
        """Read the complete lines of the buffer (split at once: an answer streams many
        small events, and only the few that name their usage are parsed)."""
        if b"\n" not in self._buffer:
            if len(self._buffer) > MAX_LINE_BYTES:
                self._buffer.clear()  # not an event stream a client could read either
            return
        *complete, rest = bytes(self._buffer).split(b"\n")
        self._buffer = bytearray(rest)
        for line in complete:
            if b"usage" in line and line.startswith(b"data:"):
                self._read_event(line[5:].strip())

    def _read_event(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except ValueError:
            return
        if not isinstance(event, Mapping):
            return
        kind = event.get("type")
        if self.fmt == "anthropic" and kind in _USAGE_EVENTS["anthropic"]:
            message = event.get("message") if kind == "message_start" else event
            if isinstance(message, Mapping):
                self._take(message.get("usage"), message.get("model"))
        elif self.fmt == "responses" and kind in _USAGE_EVENTS["responses"]:
            response = event.get("response")
            if isinstance(response, Mapping):
                self._take(response.get("usage"), response.get("model"))
        elif self.fmt == "openai" and "choices" in event:
            self._take(event.get("usage"), event.get("model"))

    def _read_document(self, data: bytes) -> None:
        try:
            document = json.loads(data)
        except ValueError:
            return
        if isinstance(document, Mapping):
            self._take(document.get("usage"), document.get("model"))

    def _take(self, usage: Any, model: Any) -> None:
        if isinstance(model, str) and model:
            self.model = model
        if isinstance(usage, Mapping):
            # A later event's field is the running total: it replaces the earlier one.
            self._fields.update((k, v) for k, v in usage.items() if v is not None)
