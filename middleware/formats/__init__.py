"""Wire-format codecs and format detection."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from middleware.formats.base import Codec
from middleware.formats.detect import AMBIGUOUS_DEFAULT, Detection, detect_format
from middleware.formats.registry import CODECS, FORMATS, get_codec


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
