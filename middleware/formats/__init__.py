"""Wire-format codecs and format detection."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from middleware.errors import FormatError
from middleware.formats.anthropic import AnthropicCodec
from middleware.formats.base import Codec
from middleware.formats.detect import AMBIGUOUS_DEFAULT, Detection, detect_format
from middleware.formats.openai import OpenAIChatCodec
from middleware.formats.responses import ResponsesCodec

CODECS: dict[str, Codec] = {
    codec.name: codec for codec in (AnthropicCodec(), OpenAIChatCodec(), ResponsesCodec())
}
FORMATS = ("auto", *CODECS)


def get_codec(name: str) -> Codec:
    """The codec for a format name (``anthropic``, ``openai`` or ``responses``)."""
    try:
        return CODECS[name]
    except KeyError:
        raise FormatError(
            f"unknown format {name!r}; expected one of: {', '.join(FORMATS)}"
        ) from None


def resolve_format(messages: Sequence[Any], name: str) -> str:
    """``name`` itself, or the detected format when ``name`` is ``"auto"``."""
    if name == "auto":
        return detect_format(messages).format
    get_codec(name)
    return name


__all__ = [
    "AMBIGUOUS_DEFAULT",
    "CODECS",
    "FORMATS",
    "Codec",
    "Detection",
    "detect_format",
    "get_codec",
    "resolve_format",
]
