"""The wire formats: every module of :mod:`middleware.formats.wire` that defines a
``CODEC`` is one, found by listing the package (a new format is one new file there).
Formats are kept in the order of their modules' names, which is the order detection,
routes and providers are asked in."""

from __future__ import annotations

import importlib
import pkgutil

import middleware.formats.wire as wire  # noqa: PLR0402 (the package itself would be a cycle)
from middleware.errors import FormatError
from middleware.formats.base import Codec


def _discover() -> dict[str, Codec]:
    found: dict[str, Codec] = {}
    for module_info in sorted(pkgutil.iter_modules(wire.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{wire.__name__}.{module_info.name}")
        codec = getattr(module, "CODEC", None)
        if codec is None:
            continue
        if not isinstance(codec, Codec):
            raise TypeError(f"{module.__name__}.CODEC is not a Codec: {codec!r}")
        if codec.name in found:
            raise TypeError(f"two wire formats are named {codec.name!r}")
        found[codec.name] = codec
    return found


#: Every format by name.
CODECS: dict[str, Codec] = _discover()
#: What ``process(format=...)`` takes.
FORMATS = ("auto", *CODECS)


def get_codec(name: str) -> Codec:
    """The codec for a format name (one of :data:`CODECS`)."""
    try:
        return CODECS[name]
    except KeyError:
        raise FormatError(
            f"unknown format {name!r}; expected one of: {', '.join(FORMATS)}"
        ) from None
