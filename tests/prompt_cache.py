"""The providers' prompt (prefix) caching with expiry, for the stand-in: each answer reports
the ``usage`` a real provider would bill (cache reads, cache writes, uncached input), so a
test can check that a proxy's cost ledger adds up exactly what the provider reported.

Facts in ../shared/reference/cost-model.md. Anthropic caches at the ``cache_control``
breakpoints of tools -> system -> messages (5 minutes, or 1 hour with ``"ttl": "1h"``);
OpenAI caches automatically in 128-token steps from 1,024 tokens. The token count is this
module's own (words and punctuation), deliberately not the characters/4 estimate of the code
under test, so the two cannot agree by construction.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

TOKEN = re.compile(r"\w+|[^\w\s]")
#: Lifetime of an Anthropic cache entry: the default, and with ``"ttl": "1h"``.
SHORT_TTL = 300.0
LONG_TTL = 3600.0
#: OpenAI caches prefixes in steps of this many tokens.
STEP = 128


def tokens(text: str) -> list[str]:
    """The stand-in's tokens: each word and each punctuation mark is one."""
    return TOKEN.findall(text)


def serialise(piece: Any) -> str:
    """A prompt piece as the cache sees it: stable whatever the order of its keys."""
    return json.dumps(piece, ensure_ascii=False, sort_keys=True)


def output_tokens(text: str, arguments: Iterable[Mapping[str, Any]] = ()) -> int:
    """What a reply costs: its text and the JSON of each tool call's arguments (at least 1,
    as a real answer always bills a token)."""
    count = len(tokens(text)) + sum(len(tokens(serialise(dict(a)))) for a in arguments)
    return max(count, 1)


@dataclass(frozen=True)
class Block:
    """One piece of an Anthropic prompt in cache order, ``cache_control`` left out."""

    #: "tool", "system", or the role of the message it belongs to (part of the hash).
    tag: str
    text: str
    tokens: int
    #: The breakpoint's lifetime, None when the block is not a breakpoint.
    ttl: float | None


def anthropic_blocks(body: Mapping[str, Any]) -> list[Block]:
    """Tools, then system, then each content block of each message, as Anthropic orders
    the prefix it caches."""
    pieces: list[tuple[str, Any]] = [("tool", tool) for tool in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, list):
        pieces += [("system", block) for block in system]
    elif system is not None:
        pieces.append(("system", system))
    for message in body.get("messages") or []:
        role, content = str(message.get("role", "")), message.get("content")
        if isinstance(content, list):
            pieces += [(role, block) for block in content]
        else:
            pieces.append((role, content))
    return [_block(tag, piece) for tag, piece in pieces]


def _block(tag: str, piece: Any) -> Block:
    ttl = None
    if isinstance(piece, dict):
        marker = piece.get("cache_control")
        piece = {k: v for k, v in piece.items() if k != "cache_control"}
        if isinstance(marker, dict):
            ttl = LONG_TTL if marker.get("ttl") == "1h" else SHORT_TTL
    text = serialise(piece)
    return Block(tag, text, len(tokens(text)), ttl)


def openai_pieces(fmt: str, body: Mapping[str, Any]) -> list[Any]:
    """The prompt's pieces in the order OpenAI caches them: tools, then the messages (Chat
    Completions) or the instructions and the input items (Responses)."""
    pieces: list[Any] = list(body.get("tools") or [])
    if fmt == "openai":  # a legacy completion's prompt, an embedding's inputs: the same
        given = [body[key] for key in ("prompt", "input") if body.get(key) is not None]
        return pieces + list(body.get("messages") or []) + given
    if fmt == "gemini":  # implicit caching, as OpenAI's: the system instruction first
        system = [body["systemInstruction"]] if body.get("systemInstruction") else []
        return system + pieces + list(body.get("contents") or [])
    if body.get("instructions") is not None:
        pieces.append(body["instructions"])
    given = body.get("input")
    if isinstance(given, list):
        pieces += given
    elif given is not None:
        pieces.append(given)
    return pieces


@dataclass
class _Entry:
    expiry: float
    ttl: float


class PromptCache:
    """The provider's cache state, shared by every request the stand-in serves; each call of
    :meth:`usage` bills one request and is kept in :attr:`reported`."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        *,
        min_tokens: int = 1024,
        openai_ttl: float = 300.0,
    ) -> None:
        self.clock = clock
        self.min_tokens = min_tokens
        self.openai_ttl = openai_ttl
        #: (format, usage) of every request billed, in order.
        self.reported: list[tuple[str, dict[str, Any]]] = []
        #: Of those, the usage billed but not said in the answer (a Chat Completions stream
        #: that did not ask for ``stream_options.include_usage``).
        self.unsaid: list[dict[str, Any]] = []
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def usage(self, fmt: str, body: Mapping[str, Any], output_tokens: int) -> dict[str, Any]:
        """Bill one request: the usage in the provider's own shape, the cache updated."""
        with self._lock:
            now = self.clock()
            if fmt == "anthropic":
                usage = self._anthropic(body, output_tokens, now)
            elif fmt in ("openai", "responses", "gemini"):
                usage = self._openai(fmt, body, output_tokens, now)
            else:
                raise ValueError(f"no prompt cache for the format {fmt!r}")
            self.reported.append((fmt, copy.deepcopy(usage)))
        return usage

    # -- Anthropic: explicit breakpoints ---------------------------------------------------

    def _anthropic(self, body: Mapping[str, Any], output: int, now: float) -> dict[str, Any]:
        blocks = anthropic_blocks(body)
        total = sum(b.tokens for b in blocks)
        marks = {i: b.ttl for i, b in enumerate(blocks) if b.ttl is not None}
        last = max(marks, default=-1)
        if last < 0 or sum(b.tokens for b in blocks[: last + 1]) < self.min_tokens:
            return anthropic_usage(total, 0, 0, 0, output)
        keys = _running_keys("anthropic", (f"{b.tag}\n{b.text}" for b in blocks[: last + 1]))
        start = 0  # blocks read from the cache
        for i in range(last, -1, -1):
            entry = self._live(keys[i], now)
            if entry is not None:
                entry.expiry = now + entry.ttl
                start = i + 1
                break
        read = sum(b.tokens for b in blocks[:start])
        # Each block written is billed at the lifetime of the breakpoint ending its segment.
        written = {SHORT_TTL: 0, LONG_TTL: 0}
        ttl = marks[last]
        for i in range(last, start - 1, -1):
            ttl = marks.get(i, ttl)
            written[ttl] += blocks[i].tokens
        for i, ttl in marks.items():
            self._store(keys[i], now, ttl)
        uncached = total - read - written[SHORT_TTL] - written[LONG_TTL]
        return anthropic_usage(uncached, written[SHORT_TTL], written[LONG_TTL], read, output)

    # -- OpenAI: automatic, in 128-token steps ---------------------------------------------

    def _openai(self, fmt: str, body: Mapping[str, Any], output: int, now: float) -> dict[str, Any]:
        prompt = [t for piece in openai_pieces(fmt, body) for t in tokens(serialise(piece))]
        checkpoints = list(range(self.min_tokens, len(prompt) + 1, STEP))
        steps = (prompt[a:b] for a, b in zip([0, *checkpoints], checkpoints, strict=False))
        keys = _running_keys(fmt, ("\n".join(step) for step in steps))
        cached = 0
        for checkpoint, key in reversed(list(zip(checkpoints, keys, strict=True))):
            if self._live(key, now) is not None:
                cached = checkpoint
                break
        for key in keys:
            self._store(key, now, self.openai_ttl)
        if fmt == "openai":
            return chat_usage(len(prompt), cached, output)
        if fmt == "gemini":
            return gemini_usage(len(prompt), cached, output)
        return responses_usage(len(prompt), cached, output)

    # -- the entries -----------------------------------------------------------------------

    def _live(self, key: str, now: float) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is not None and not now < entry.expiry:
            del self._entries[key]
            return None
        return entry

    def _store(self, key: str, now: float, ttl: float) -> None:
        entry = self._live(key, now)
        if entry is None or entry.expiry < now + ttl:
            self._entries[key] = _Entry(now + ttl, ttl)


def _running_keys(namespace: str, parts: Iterable[str]) -> list[str]:
    """The key of each prefix: a hash of every part up to and including it (parts hold no
    raw newline, so the separator keeps them apart)."""
    running = hashlib.sha256(f"{namespace}\n".encode())
    keys = []
    for part in parts:
        running.update(f"{part}\n".encode())
        keys.append(running.hexdigest())
    return keys


def anthropic_usage(
    uncached: int, five_minutes: int, one_hour: int, read: int, output: int
) -> dict[str, Any]:
    """Anthropic's Messages ``usage`` object."""
    return {
        "input_tokens": uncached,
        "cache_creation_input_tokens": five_minutes + one_hour,
        "cache_read_input_tokens": read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": five_minutes,
            "ephemeral_1h_input_tokens": one_hour,
        },
        "output_tokens": output,
        "service_tier": "standard",
    }


def chat_usage(prompt: int, cached: int, output: int) -> dict[str, Any]:
    """OpenAI Chat Completions' ``usage`` object."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def responses_usage(prompt: int, cached: int, output: int) -> dict[str, Any]:
    """OpenAI Responses' ``usage`` object."""
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + output,
    }


def gemini_usage(prompt: int, cached: int, output: int) -> dict[str, Any]:
    """Gemini's ``usageMetadata`` (implicit caching reads ``cachedContentTokenCount``)."""
    usage = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output,
    }
    return {**usage, "cachedContentTokenCount": cached} if cached else usage
