"""JSON documents as the wire carries them: read with typed errors for whatever is not
JSON, written so that what was read comes back, and files replaced atomically.

Python's ``json`` accepts ``NaN`` and ``Infinity`` (not JSON), raises ``RecursionError`` on
deep nesting and ``ValueError`` on integers of more than 4,300 digits, and a lone surrogate
(``"\\udfff"``, valid JSON) cannot be encoded as UTF-8. Here each is an
:class:`~middleware.errors.InputError` saying what is wrong, or, for lone surrogates,
written back as the same ``\\u`` escape.

With ``orjson`` installed (the ``proxy`` extra), a request body is read and written by it,
six and fourteen times faster on a 440 KB body; whatever it refuses (a lone surrogate, an
integer past 64 bits, NaN, another encoding, deep nesting) goes to ``json`` for its verdict,
so the answers are the same. orjson reads an integer past 64 bits as a float, so a body with
a run of 19 digits anywhere is read by ``json`` alone.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from middleware.errors import InputError

orjson: Any
try:
    import orjson
except ImportError:  # the library alone: the standard library does it all
    orjson = None

_SURROGATE = re.compile("[\ud800-\udfff]")
#: Past 64 bits (below -2**63 has 19 digits), orjson reads an integer as a float: text
#: with a run of 19 digits goes to json.
#: Found by mapping digits to 1 and the rest to 0 (seven times faster than a regex).
_DIGITS = bytes(49 if 48 <= byte <= 57 else 48 for byte in range(256))
_LONG_RUN = b"1" * 19
#: Larger bodies are read by ``json``: orjson's reader takes fourteen times the body while
#: it reads (``json``: three times; 450 MB against 100 MB for a 32 MB body), and is hardly
#: faster there (92 ms against 113 ms).
ORJSON_MAX_BYTES = 4 * 1024 * 1024


def loads(data: bytes | str) -> Any:
    """The document ``data`` holds (bytes in UTF-8, or UTF-16/32 with a byte-order mark).

    :raises InputError: not text in a JSON encoding, not JSON, nested too deeply, a number
        JSON does not have (NaN, Infinity) or one too long to read.
    """
    if orjson is not None and len(data) <= ORJSON_MAX_BYTES and not _long_digits(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # the standard library says what is wrong, or reads what orjson cannot
    try:
        return json.loads(data, parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not UTF-8 text (byte {exc.start}: {exc.reason}); JSON must be UTF-8"
        ) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise InputError("nested too deeply to be a conversation") from None
    except ValueError as exc:  # an integer over sys.get_int_max_str_digits() digits
        raise InputError(f"not a usable number: {exc}") from None


def _long_digits(data: bytes | str) -> bool:
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    return raw.translate(_DIGITS).find(_LONG_RUN) != -1


def dumps(value: Any, *, indent: int | None = 2) -> str:
    """``value`` as JSON text that encodes to valid UTF-8: non-ASCII characters as they
    are, lone surrogates as their ``\\u`` escapes (so they round-trip)."""
    text = json.dumps(value, ensure_ascii=False, indent=indent, allow_nan=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def wire(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON, as request bodies are sent (no spaces; non-ASCII
    characters as they are; lone surrogates as their ``\\u`` escapes)."""
    if orjson is not None:
        try:
            written: bytes = orjson.dumps(value)
            return written
        except orjson.JSONEncodeError:
            pass  # a lone surrogate or a huge integer: the standard library writes it
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def write_atomically(path: str | Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) all at once: readers see the old file or the
    new one, never a part; on any failure the old file is left as it was."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        data = text.encode("utf-8")
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        if fd != -1:
            os.close(fd)
        Path(tmp).unlink(missing_ok=True)
        raise


def _no_constant(name: str) -> Any:
    raise InputError(f"{name} is not a JSON value (write null, or a number)")
