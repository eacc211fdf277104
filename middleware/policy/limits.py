"""The bounds every policy input is held to, and the check of a value against them.

A policy file, an ``extends`` target, a ``.env`` file, an environment value or an explicit
override may be hostile or broken; each bound turns what would be a hang, an exhausted
memory or a crash deep inside a step into a short :class:`~middleware.PolicyError`. No real
policy comes near them (the shipped presets are about 2 KiB and 150 values).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterable, Mapping
from typing import Any

#: Largest policy or ``.env`` file read (and the most bytes read from one), 1 MiB.
MAX_FILE_BYTES = 1 << 20
#: Most YAML nodes (keys and values, aliases expanded) in one file or one merged policy.
MAX_NODES = 10_000
#: Deepest nesting of mappings and lists (the policy's own mapping is the first level).
MAX_DEPTH = 32
#: Most files in one ``extends`` chain.
MAX_EXTENDS = 16
#: Largest magnitude of any number (2**53, the largest integer a JSON double holds exactly).
MAX_NUMBER = 2**53
#: Longest text an error message quotes from a policy (longer values are cut with "…").
MAX_QUOTE = 60

FILE_SIZE = f"{MAX_FILE_BYTES >> 20} MiB ({MAX_FILE_BYTES:,} bytes)"
NUMBER_RANGE = f"out of range: a number must be at most 2**53 ({MAX_NUMBER:,}) in magnitude"
NOT_FINITE = "not a finite number (NaN and infinity are not allowed)"
TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep"
TOO_MANY = f"more than {MAX_NODES:,} keys and values"


class ValueProblem(Exception):
    """A part of a value that is not plain, bounded policy data: where (a JSON path) and
    why. Callers turn it into a :class:`~middleware.PolicyError` located their own way."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def clip(text: str, limit: int = MAX_QUOTE) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quote(value: Any, limit: int = MAX_QUOTE) -> str:
    """A short ``repr`` of ``value`` for an error message."""
    return clip(repr(value), limit)


def child_path(path: str, key: str) -> str:
    """``path.key``, the key cut short and its control characters escaped, so a path stays
    one short line however the key is written."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in clip(key))
    return f"{path}.{shown}"


def json_path(parts: Iterable[str | int]) -> str:
    """The JSON path of a sequence of keys and indices, written as :func:`child_path`
    writes each step (the lines of a file are remembered under the same paths)."""
    path = "$"
    for part in parts:
        path = f"{path}[{part}]" if isinstance(part, int) else child_path(path, str(part))
    return path


def plain(value: Any, path: str = "$") -> Any:
    """A fresh copy of ``value`` as plain JSON data (dicts with text keys, lists, text,
    finite numbers within :data:`MAX_NUMBER`, booleans, ``None``), within the nesting and
    size bounds; raises :class:`ValueProblem` at the first part that is not."""
    return _plain(value, path, 0, [0])


def _plain(value: Any, path: str, depth: int, count: list[int]) -> Any:
    count[0] += 1
    if count[0] > MAX_NODES:
        raise ValueProblem(path, TOO_MANY)
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueProblem(path, NOT_FINITE)
        if abs(value) > MAX_NUMBER:
            raise ValueProblem(path, NUMBER_RANGE)
        return value
    if isinstance(value, (Mapping, list, tuple)) and depth >= MAX_DEPTH:
        raise ValueProblem(path, TOO_DEEP)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueProblem(path, f"a key must be text, not {_kind(key)}; quote it")
            count[0] += 1
            out[key] = _plain(item, child_path(path, key), depth + 1, count)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(item, f"{path}[{i}]", depth + 1, count) for i, item in enumerate(value)]
    if isinstance(value, (datetime.date, datetime.time)):
        raise ValueProblem(path, "a date or time is not a policy value; quote it to make it text")
    raise ValueProblem(
        path,
        f"{_kind(value)} is not a policy value (use text, a number, true/false, null, a list "
        "or a mapping)",
    )


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, (bytes, bytearray)):
        return "binary data"
    if isinstance(value, (set, frozenset)):
        return "a set"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return f"a Python {type(value).__name__}"
