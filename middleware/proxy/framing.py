"""What a request head must be before the proxy reads it: whole within bounded sizes, and
framed one way only.

h11, which uvicorn reads requests with, is lenient where a proxy may not be. It takes a
request with both ``Content-Length`` and ``Transfer-Encoding`` by the latter and keeps the
connection for what follows, where RFC 9112 §6.3 says a server MUST close it: a server
in front that went by ``Content-Length`` reads the bytes after the chunked body as part
of the body, h11 as a second request, smuggled past it. It also reads a repeated or
listed ``Content-Length`` (``10, 10``), lines ended by a bare LF and header lines folded
onto the next (each read one way here and another way elsewhere: the same opening for
smuggling), and a head of any size that comes in one read (a 100 KB request line was
relayed, and ended in a 500 and a traceback). :func:`refusal` says which heads are
refused, and with what status; h11 then reads the others, refusing what else it finds
wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Bytes of a request line, its CRLF included, at most (else a 414), as nginx and Apache
#: allow: a provider's path and query take a few hundred.
MAX_REQUEST_LINE_BYTES = 8 * 1024
#: Bytes of a whole request head (line and headers), at most (else a 431): the agents
#: send a few kilobytes, and the providers' own front servers refuse past 32 KB or so.
MAX_HEAD_BYTES = 64 * 1024

#: The blank line that ends a head, as h11 finds it (a bare LF included).
_HEAD_END = re.compile(rb"\n\r?\n")


@dataclass(frozen=True)
class Refusal:
    """A head refused: the status answered, and why (said to the client and logged)."""

    status: int
    reason: str


def refusal(received: bytes) -> Refusal | None:
    """Why the request head that ``received`` starts with is refused, or ``None``: it is
    not (or is not whole yet, and still within the sizes allowed)."""
    line_end = received.find(b"\n", 0, MAX_REQUEST_LINE_BYTES)
    if line_end == -1:
        if len(received) >= MAX_REQUEST_LINE_BYTES:
            return Refusal(414, f"the request line is longer than {MAX_REQUEST_LINE_BYTES:,} "
                           "bytes")  # fmt: skip
        return None
    end = _HEAD_END.search(received, 0, MAX_HEAD_BYTES)
    if end is None:
        if len(received) >= MAX_HEAD_BYTES:
            return Refusal(431, f"the request head is longer than {MAX_HEAD_BYTES:,} bytes")
        return None
    return _framing(received[: end.start() + 1].split(b"\n")[:-1])


def _framing(lines: list[bytes]) -> Refusal | None:
    """Why a whole head, as its lines (each without its LF), is refused, or ``None``."""
    if any(not line.endswith(b"\r") for line in lines):
        return Refusal(400, "a line of the request head ends in a bare LF, not CRLF")
    request_line, fields = lines[0], lines[1:]
    if any(line[:1] in (b" ", b"\t") for line in fields):
        return Refusal(400, "a header of the request is folded onto the next line "
                       "(obsolete line folding, RFC 9112 §5.2)")  # fmt: skip
    lengths: list[bytes] = []
    encoded = False  # a Transfer-Encoding (h11 refuses any but chunked)
    for line in fields:
        name, _, value = line.partition(b":")
        name = name.lower()
        if name == b"content-length":
            lengths.append(value.strip(b" \t\r"))
        elif name == b"transfer-encoding":
            encoded = True
    if lengths and encoded:
        return Refusal(400, "the request has both Content-Length and Transfer-Encoding, "
                       "which may smuggle a request (RFC 9112 §6.3): send one of them")  # fmt: skip
    if len(lengths) > 1:
        return Refusal(400, "the request has more than one Content-Length")
    if lengths and not lengths[0].isdigit():  # ASCII digits only, no sign
        return Refusal(400, f"the request's Content-Length is not a number of bytes: "
                       f"{lengths[0][:40].decode('latin-1')!r}")  # fmt: skip
    if encoded and request_line.rstrip(b"\r").endswith(b" HTTP/1.0"):
        return Refusal(400, "an HTTP/1.0 request has a Transfer-Encoding, which HTTP/1.0 "
                       "does not have (RFC 9112 §6.1)")  # fmt: skip
    return None
