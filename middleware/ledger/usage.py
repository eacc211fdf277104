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
from middleware.formats.base import Codec

logger = logging.getLogger(__name__)

#: Bytes of a JSON answer read for its usage at most (an answer is a few KB; a larger one
#: is not a model's answer, or not one worth holding in memory to read).
MAX_ANSWER_BYTES = 4 * 1024 * 1024
#: Bytes of one server-sent event line kept while it arrives (a Responses
#: ``response.completed`` carries the whole answer).
MAX_LINE_BYTES = 8 * 1024 * 1024
#: Bytes a compressed event stream is inflated to, at most, to read its usage (a long
#: answer streams a few MB; a compressed JSON answer stops at :data:`MAX_ANSWER_BYTES`).
MAX_INFLATED_BYTES = 64 * 1024 * 1024
#: One chunk of a compressed answer is inflated to :data:`INFLATION_FLOOR` bytes plus
#: :data:`INFLATION_RATIO` times its own size, at most: text and JSON compress 3 to 20
#: times, a bomb of one repeated byte a thousand times. Past either bound the answer's
#: usage is not read (the ledger counts it ``unread``); each chunk costs O(its size).
INFLATION_RATIO = 64
INFLATION_FLOOR = 1024 * 1024


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


def codec_of(fmt: Codec | str) -> Codec:
    """``fmt`` itself, or the codec of the format it names (a caller that holds the codec,
    the proxy, has it looked up by no name)."""
    return fmt if isinstance(fmt, Codec) else get_codec(fmt)


def read_usage(fmt: Codec | str, usage: Any) -> Usage | None:
    """The :class:`Usage` of a provider's ``usage`` object in wire format ``fmt`` (as its
    codec reads it: :meth:`.Codec.usage_counts`), or ``None`` if it is not one (absent,
    ``null``, or of another shape)."""
    if not isinstance(usage, Mapping):
        return None
    counts = codec_of(fmt).usage_counts(usage)
    return None if counts is None else Usage(*counts)


class UsageReader:
    """Reads the usage and the model of one answer as its bytes are relayed, chunk by
    chunk, without holding a streamed answer: a JSON answer is read whole at the end (up
    to :data:`MAX_ANSWER_BYTES`), an event stream line by line. A gzip or deflate answer
    is read through a decompressor, bounded per chunk and in all (:data:`INFLATION_RATIO`,
    :data:`MAX_INFLATED_BYTES`: a bomb is read no further, and its usage is ``None``);
    another encoding is not read (``usage`` stays ``None``)."""

    def __init__(
        self, fmt: Codec | str, content_type: str = "", content_encoding: str = ""
    ) -> None:
        #: The answer's format (its name: :attr:`fmt`).
        self.codec = codec_of(fmt)
        self.fmt = self.codec.name
        self.streamed = "event-stream" in content_type.lower()
        encoding = content_encoding.strip().lower()
        self._decoder: Any = None
        self.readable = encoding in ("", "identity", "gzip", "x-gzip", "deflate")
        if encoding in ("gzip", "x-gzip"):
            self._decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._decoder = zlib.decompressobj()
        #: Bytes the decompressor gave so far.
        self.inflated = 0
        #: A JSON answer so far, or the start of an event stream's line still arriving.
        self._buffer = bytearray()
        #: Whether the line arriving is over :data:`MAX_LINE_BYTES` (dropped to its end).
        self._skipping = False
        self._fields: dict[str, Any] = {}
        self.model: str | None = None
        #: The provider's id of the answer, where it gives one.
        self.response_id: str | None = None
        self._overflow = False

    def feed(self, chunk: bytes) -> None:
        """One more chunk of the answer as it came."""
        if not self.readable or self._overflow:
            return
        if self._decoder is not None:
            inflated = self._inflate(chunk)
            if inflated is None:
                return
            chunk = inflated
        if self.streamed:
            self._read_lines(chunk)
        elif len(self._buffer) + len(chunk) > MAX_ANSWER_BYTES:
            self._give_up()
        else:
            self._buffer += chunk

    @property
    def usage(self) -> Usage | None:
        """What the answer reported so far (the whole of it once the answer ended), or
        ``None``: none, or the answer was past a bound (what it said before is not the
        whole bill)."""
        if self._overflow:
            return None
        if not self.streamed and self._buffer:
            self._read_document(bytes(self._buffer))
            self._buffer.clear()
        return read_usage(self.codec, self._fields) if self._fields else None

    def _inflate(self, chunk: bytes) -> bytes | None:
        """``chunk`` inflated, no further than its bounds (``None`` past them, or if it
        does not inflate: the answer is read no more)."""
        if self.streamed:
            room = MAX_INFLATED_BYTES - self.inflated
        else:
            room = MAX_ANSWER_BYTES - len(self._buffer)
        bound = min(INFLATION_FLOOR + INFLATION_RATIO * len(chunk), room)
        try:
            # One byte past the bound tells an answer that reaches it from one past it.
            out: bytes = self._decoder.decompress(chunk, bound + 1)
        except zlib.error as exc:
            logger.info("cannot decompress an answer to read its usage: %s", exc)
            self.readable = False
            return None
        self.inflated += len(out)
        if len(out) > bound:
            logger.warning(
                "an answer inflates past %d bytes (%d compressed in one chunk, %d inflated "
                "in all): its usage is not read and the ledger counts it unread",
                bound,
                len(chunk),
                self.inflated,
            )
            self._give_up()
            return None
        return out

    def _give_up(self) -> None:
        """Read this answer no further: its usage is ``None``."""
        self._overflow = True
        self._decoder = None
        self._buffer = bytearray()
        self._fields.clear()

    def _read_lines(self, data: bytes) -> None:
        """Read the lines ``data`` completes, in O(``data``): only the few lines that name
        a usage are looked at (an answer streams many small events); the last line, not
        complete yet, is kept for the next chunk."""
        last = data.rfind(b"\n")
        if last == -1:
            self._hold(data)
            return
        start = 0
        if self._buffer or self._skipping:  # a line begun in an earlier chunk ends here
            start = data.find(b"\n") + 1
            if not self._skipping and len(self._buffer) + start <= MAX_LINE_BYTES:
                self._buffer += data[: start - 1]
                self._read_line(bytes(self._buffer))
            self._buffer.clear()
            self._skipping = False
        at = data.find(b"usage", start, last)
        while at != -1:
            begins = max(start, data.rfind(b"\n", start, at) + 1)
            ends = data.find(b"\n", at, last + 1)
            self._read_line(data[begins:ends])
            at = data.find(b"usage", ends, last)
        self._hold(data[last + 1 :])

    def _hold(self, part: bytes) -> None:
        """Keep ``part`` of the line arriving, unless the line is over
        :data:`MAX_LINE_BYTES` (not an event stream a client could read either)."""
        if self._skipping:
            return
        if len(self._buffer) + len(part) > MAX_LINE_BYTES:
            self._buffer.clear()
            self._skipping = True
        else:
            self._buffer += part

    def _read_line(self, line: bytes) -> None:
        if line.startswith(b"data:") and b"usage" in line:
            self._read_event(line[5:].strip())

    def _read_event(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except ValueError:
            return
        if not isinstance(event, Mapping):
            return
        found = self.codec.event_usage(event)
        if found is not None:
            self._take(*found, self.codec.event_id(event))

    def _read_document(self, data: bytes) -> None:
        try:
            document = json.loads(data)
        except ValueError:
            return
        if isinstance(document, Mapping):
            self._take(*self.codec.answer_usage(document), self.codec.answer_id(document))

    def _take(self, usage: Any, model: Any, answer_id: Any = None) -> None:
        if isinstance(model, str) and model:
            self.model = model
        if self.response_id is None and isinstance(answer_id, str) and answer_id:
            self.response_id = answer_id
        if isinstance(usage, Mapping):
            # A later event's field is the running total: it replaces the earlier one.
            self._fields.update((k, v) for k, v in usage.items() if v is not None)
