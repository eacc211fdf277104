"""The replay cost model: what a sequence of requests costs with prompt caching.

Caching is an exact prefix match, so request *k* reads from the cache the longest prefix it
shares with request *k-1* and pays the write price for the rest::

    cost_k = read_price * cached_prefix_k + write_price * (tokens_k - cached_prefix_k)

Prices are relative to the base input price of the model (1.0 per token). Tokens are
characters / 4 unless a ``count_tokens`` plugin gives a real tokenizer.

The cache expires: an entry not read for the pricing's ``lifetime`` is gone (each read
renews it). Given the time of each request, one that comes longer than that after the
previous one reads nothing and writes its whole prompt again, whatever it shares with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Pricing:
    """Prices per input token, relative to the model's base input price, and how long a
    cache entry lives unread (``None``: for ever)."""

    name: str
    read: float
    write: float
    description: str
    lifetime: float | None = None


#: Seconds a cache entry lives unread: Anthropic's default and its 1-hour option; OpenAI
#: keeps prefixes 5 to 10 minutes (the shorter is taken).
FIVE_MINUTES, ONE_HOUR = 300.0, 3600.0

PRICING: dict[str, Pricing] = {
    p.name: p
    for p in (
        Pricing("anthropic-5m", 0.1, 1.25, "Anthropic, 5-minute cache: read 0.1x, write 1.25x",
                FIVE_MINUTES),
        Pricing("anthropic-1h", 0.1, 2.0, "Anthropic, 1-hour cache: read 0.1x, write 2x",
                ONE_HOUR),
        Pricing("openai-gpt-4o", 0.5, 1.0, "OpenAI gpt-4o: cached input -50%, free writes",
                FIVE_MINUTES),
        Pricing("openai-gpt-4.1", 0.25, 1.0, "OpenAI gpt-4.1: cached input -75%, free writes",
                FIVE_MINUTES),
        Pricing("openai-gpt-5", 0.1, 1.0, "OpenAI GPT-5 family: cached input -90%, free writes",
                FIVE_MINUTES),
        Pricing("openai-gpt-5.6", 0.1, 1.25, "OpenAI GPT-5.6 family: -90%, writes 1.25x",
                FIVE_MINUTES),
    )
}  # fmt: skip

TokenCounter = Callable[[str], int]


def approximate_tokens(text: str) -> int:
    """Characters / 4, rounded up: the usual rough count for English and code."""
    return chars_to_tokens(len(text))


def chars_to_tokens(chars: int) -> int:
    """:func:`approximate_tokens` of a text of ``chars`` characters."""
    return (chars + 3) // 4


def _encode(value: Any) -> str:
    """Compact JSON, keys in their order: a request's bytes as the cache sees them."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def serialize(messages: Sequence[Any]) -> str:
    """The request as sent (the cache sees bytes)."""
    return _encode(list(messages))


class Serializer:
    """:func:`serialize` for the requests of one session, one after the other: each request
    repeats the messages of the one before (the same objects, which the pipeline passes
    through untouched), so a message the previous request held is not encoded again. A
    message must not be changed in place between two requests (none is, in a replay)."""

    def __init__(self) -> None:
        #: The previous request's messages by identity, each with its encoding (the
        #: message is held, so that its identity cannot pass to another object).
        self._previous: dict[int, tuple[Any, str]] = {}

    def __call__(self, messages: Sequence[Any]) -> str:
        previous, current = self._previous, {}
        parts = []
        for message in messages:
            kept = previous.get(id(message))
            if kept is None or kept[0] is not message:
                kept = (message, _encode(message))
            current[id(message)] = kept
            parts.append(kept[1])
        self._previous = current
        return "[" + ",".join(parts) + "]"


def common_prefix_length(a: str, b: str, chunk: int = 1 << 16) -> int:
    """Length of the longest common prefix. Chunks of ``chunk`` characters are compared in
    one pass (C-level comparisons), then a binary search finds the first difference inside
    the chunk that differs: a cached prefix is most of a request, and a binary search over
    the whole text would copy it once per step."""
    size = min(len(a), len(b))
    start = 0
    while start < size:
        end = min(start + chunk, size)
        if a[start:end] != b[start:end]:
            break
        start = end
    else:
        return size
    low, high = start, end - 1  # a character in [start, end) differs
    while low < high:
        middle = (low + high + 1) // 2
        if a[start:middle] == b[start:middle]:
            low = middle
        else:
            high = middle - 1
    return low


@dataclass(frozen=True)
class RequestCost:
    tokens: int
    cached_tokens: int
    cost: float
    #: Whether the cache had expired since the previous request (it read nothing).
    expired: bool = False

    @classmethod
    def charged(cls, pricing: Pricing, tokens: int, cached: int) -> RequestCost:
        """A request of ``tokens``, ``cached`` of them read from the cache, the rest written."""
        return cls(tokens, cached, pricing.read * cached + pricing.write * (tokens - cached))


def request_costs(
    requests: Sequence[str],
    pricing: Pricing,
    count: TokenCounter = approximate_tokens,
    times: Sequence[float | None] = (),
) -> list[RequestCost]:
    """Charge each serialised request against the one before it (the first is a cold
    write). A cached prefix is counted in tokens of the shared text. With ``times`` (the
    seconds at which each request was sent; ``None`` or missing: unknown), a request sent
    more than ``pricing.lifetime`` after the previous one finds the cache expired."""
    out: list[RequestCost] = []
    previous = ""
    for k, text in enumerate(requests):
        expired = bool(previous) and _expired(pricing, times, k)
        shared = 0 if expired else common_prefix_length(previous, text)
        tokens = count(text)
        cached = min(count(text[:shared]) if shared else 0, tokens)
        charged = RequestCost.charged(pricing, tokens, cached)
        out.append(RequestCost(charged.tokens, charged.cached_tokens, charged.cost, expired))
        previous = text
    return out


def _expired(pricing: Pricing, times: Sequence[float | None], k: int) -> bool:
    """Whether request ``k`` came more than the cache's lifetime after request ``k - 1``."""
    if pricing.lifetime is None or k >= len(times):
        return False
    now, before = times[k], times[k - 1]
    return now is not None and before is not None and now - before > pricing.lifetime


def readback_cost(pricing: Pricing, request_tokens: int, result_tokens: int) -> float:
    """What reading a hidden result back costs: one more request whose prefix (the request
    as sent) comes from the cache, plus the result's full text written again."""
    return pricing.read * request_tokens + pricing.write * result_tokens
