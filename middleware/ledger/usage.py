"""The tokens a provider billed for one answer, read from the ``usage`` it reports: in a
JSON answer, or across a streamed one (server-sent events). Where each format reports it,
and what its fields mean, is the format's own (:meth:`.Codec.usage_counts`,
:meth:`.Codec.answer_usage`, :meth:`.Codec.event_usage`): Anthropic's ``message_start`` and
``message_delta``, Chat Completions' last chunk (when the request asked for
``stream_options.include_usage``), Responses' ``response.completed``. A later event's field
replaces an earlier one's: the last value is the one billed.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from middleware.formats import get_codec

logger = logging.getLogger(__name__)

#: Bytes of a JSON answer read for its usage at most (an answer is a few KB; a larger one
#: is not a model's answer, or not one worth holding in memory to read).
MAX_ANSWER_BYTES = 4 * 1024 * 1024
#: Bytes of one server-sent event line kept while it arrives (a Responses
#: ``response.completed`` carries the whole answer).
MAX_LINE_BYTES = 8 * 1024 * 1024


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
    """The :class:`Usage` of a provider's ``usage`` object in wire format ``fmt`` (as its
    codec reads it: :meth:`.Codec.usage_counts`), or ``None`` if it is not one (absent,
    ``null``, or of another shape)."""
    if not isinstance(usage, Mapping):
        return None
    counts = get_codec(fmt).usage_counts(usage)
    return None if counts is None else Usage(*counts)


class UsageReader:
    """Reads the usage and the model of one answer as its bytes are relayed, chunk by
    chunk, without holding a streamed answer: a JSON answer is read whole at the end (up
    to :data:`MAX_ANSWER_BYTES`), an event stream line by line. A gzip or deflate answer
    is read through a decompressor; another encoding is not read (``usage`` stays
    ``None``)."""

    def __init__(self, fmt: str, content_type: str = "", content_encoding: str = "") -> None:
        self.fmt = fmt
        self._codec = get_codec(fmt)
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
        found = self._codec.event_usage(event)
        if found is not None:
            self._take(*found)

    def _read_document(self, data: bytes) -> None:
        try:
            document = json.loads(data)
        except ValueError:
            return
        if isinstance(document, Mapping):
            self._take(*self._codec.answer_usage(document))

    def _take(self, usage: Any, model: Any) -> None:
        if isinstance(model, str) and model:
            self.model = model
        if isinstance(usage, Mapping):
            # A later event's field is the running total: it replaces the earlier one.
            self._fields.update((k, v) for k, v in usage.items() if v is not None)
