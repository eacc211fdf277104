"""Pairing repair: the ids of calls. A call without one gets an id made from what it is;
an id the Anthropic API rejects, or one repeated where the format wants ids unique, is
renamed; every id handed out is one the history does not use."""

from __future__ import annotations

import hashlib
import json
import re

from middleware.formats.base import Codec
from middleware.formats.wire.anthropic_rules import MAX_ID_LENGTH
from middleware.view import ToolCall


def generated_id(codec: Codec, origin: int | None, block: int, call: ToolCall) -> str:
    """A deterministic id for a call that had none: a digest of its position and content,
    so the same history always gets the same id (and the same prompt-cache bytes)."""
    args = json.dumps(call.arguments, sort_keys=True, ensure_ascii=False, default=repr)
    digest = hashlib.sha256(f"{origin}:{block}:{call.name}:{args}".encode()).hexdigest()[:16]
    return codec.generated_id_prefix + digest


def sanitized_id(original: str) -> str:
    """An id the Anthropic API accepts for ``original``: characters outside
    ``[a-zA-Z0-9_-]`` become ``_`` and a digest of the original keeps distinct ids distinct
    (``call_1|fc_2`` -> ``call_1_fc_2_1f0c5a2b``), whatever else the history holds, so the
    rename never changes as the conversation grows."""
    digest = hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    stem = re.sub(r"[^a-zA-Z0-9_-]", "_", original)[: MAX_ID_LENGTH - len(digest) - 1]
    return f"{stem}_{digest}"


class IdPool:
    """The ids a history uses, handing out unused ones: ``base`` itself if free, else
    ``base__N`` for the smallest free N >= 2, cut to keep within 64 characters when ``base``
    was (suffixes use only ``_`` and digits, so an id matching ``^[a-zA-Z0-9_-]+$`` still
    does). Ids are only ever added, so the search for a base resumes where it last stopped:
    one id repeated in every turn costs linear time, not quadratic."""

    def __init__(self, used: set[str]) -> None:
        self.used = used
        self._next: dict[str, int] = {}

    def take(self, base: str) -> str:
        if base not in self.used:
            return base
        n = self._next.get(base, 2)
        while True:
            suffix = f"__{n}"
            stem = base
            if len(base) <= MAX_ID_LENGTH < len(base) + len(suffix):
                stem = base[: MAX_ID_LENGTH - len(suffix)]
            candidate = stem + suffix
            if candidate not in self.used:
                self._next[base] = n + 1
                return candidate
            n += 1
