"""The replay cost model: what a sequence of requests costs with prompt caching.

Caching is an exact prefix match, so request *k* reads from the cache the longest prefix it
shares with request *k-1* and pays the write price for the rest::

    cost_k = read_price * cached_prefix_k + write_price * (tokens_k - cached_prefix_k)

Prices are relative to the base input price of the model (1.0 per token). Tokens are
characters / 4 unless a ``count_tokens`` plugin gives a real tokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Pricing:
    """Prices per input token, relative to the model's base input price."""

    name: str
    read: float
    write: float
    description: str


PRICING: dict[str, Pricing] = {
    p.name: p
    for p in (
        Pricing("anthropic-5m", 0.1, 1.25, "Anthropic, 5-minute cache: read 0.1x, write 1.25x"),
        Pricing("anthropic-1h", 0.1, 2.0, "Anthropic, 1-hour cache: read 0.1x, write 2x"),
        Pricing("openai-gpt-4o", 0.5, 1.0, "OpenAI gpt-4o: cached input -50%, free writes"),
        Pricing("openai-gpt-4.1", 0.25, 1.0, "OpenAI gpt-4.1: cached input -75%, free writes"),
        Pricing("openai-gpt-5", 0.1, 1.0, "OpenAI GPT-5 family: cached input -90%, free writes"),
        Pricing("openai-gpt-5.6", 0.1, 1.25, "OpenAI GPT-5.6 family: -90%, writes 1.25x"),
    )
}

TokenCounter = Callable[[str], int]


def approximate_tokens(text: str) -> int:
    """Characters / 4, rounded up: the usual rough count for English and code."""
    return chars_to_tokens(len(text))


def chars_to_tokens(chars: int) -> int:
    """:func:`approximate_tokens` of a text of ``chars`` characters."""
    return (chars + 3) // 4


def serialize(messages: Sequence[Any]) -> str:
    """The request as sent: compact JSON, keys in their order (the cache sees bytes)."""
    return json.dumps(list(messages), ensure_ascii=False, separators=(",", ":"))


def common_prefix_length(a: str, b: str) -> int:
    """Length of the longest common prefix (binary search over C-level comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


@dataclass(frozen=True)
class RequestCost:
    tokens: int
    cached_tokens: int
    cost: float

    @classmethod
    def charged(cls, pricing: Pricing, tokens: int, cached: int) -> RequestCost:
        """A request of ``tokens``, ``cached`` of them read from the cache, the rest written."""
        return cls(tokens, cached, pricing.read * cached + pricing.write * (tokens - cached))


def request_costs(
    requests: Sequence[str], pricing: Pricing, count: TokenCounter = approximate_tokens
) -> list[RequestCost]:
    """Charge each serialised request against the one before it (the first is a cold
    write). A cached prefix is counted in tokens of the shared text."""
    out: list[RequestCost] = []
    previous = ""
    for text in requests:
        shared = common_prefix_length(previous, text)
        tokens = count(text)
        cached = min(count(text[:shared]) if shared else 0, tokens)
        out.append(RequestCost.charged(pricing, tokens, cached))
        previous = text
    return out
