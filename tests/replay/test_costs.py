"""The replay cost model, against hand-computed examples."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from middleware.replay.costs import (
    PRICING,
    Serializer,
    approximate_tokens,
    common_prefix_length,
    request_costs,
    serialize,
)

A5 = PRICING["anthropic-5m"]


def test_first_request_is_a_cold_write_then_the_prefix_is_read() -> None:
    first = "a" * 400  # 100 tokens
    second = first + "b" * 400  # 200 tokens, 100 cached
    third = second  # fully cached
    costs = request_costs([first, second, third], A5)
    assert [c.tokens for c in costs] == [100, 200, 200]
    assert [c.cached_tokens for c in costs] == [0, 100, 200]
    assert [c.cost for c in costs] == pytest.approx([125.0, 10.0 + 125.0, 20.0])


def test_an_early_rewrite_pays_for_everything_after_it() -> None:
    # cost-model.md: L = 150k tokens, rewrite at k = 20k removing S = 60k.
    k, rest, removed = "p" * 80_000, "q" * 240_000, "r" * 240_000
    before = k + removed + rest  # 140k tokens
    after = k + rest  # 80k tokens: only the first 20k are still cached
    cold, warm, rewritten = request_costs([before, before, after], A5)
    assert warm.cost == pytest.approx(0.1 * 140_000)
    assert rewritten.cached_tokens == 20_000
    assert rewritten.cost == pytest.approx(0.1 * 20_000 + 1.25 * 60_000)
    assert cold.cost == pytest.approx(1.25 * 140_000)


@pytest.mark.parametrize(
    ("name", "read", "write"),
    [("anthropic-5m", 0.1, 1.25), ("anthropic-1h", 0.1, 2.0), ("openai-gpt-4o", 0.5, 1.0),
     ("openai-gpt-4.1", 0.25, 1.0), ("openai-gpt-5", 0.1, 1.0), ("openai-gpt-5.6", 0.1, 1.25)],
)  # fmt: skip
def test_pricing_presets(name: str, read: float, write: float) -> None:
    assert (PRICING[name].read, PRICING[name].write) == (read, write)
    (cost,) = request_costs(["x" * 4000], PRICING[name])
    assert cost.cost == pytest.approx(write * 1000)


def test_a_custom_token_counter_is_used() -> None:
    words = lambda text: len(text.split())  # noqa: E731
    first, second = request_costs(["one two three", "one two three four five"], A5, words)
    assert (first.tokens, second.tokens, second.cached_tokens) == (3, 5, 3)


def test_serialize_is_compact_and_keeps_unicode() -> None:
    assert serialize([{"role": "user", "content": "é"}]) == '[{"role":"user","content":"é"}]'
    assert approximate_tokens("") == 0
    assert approximate_tokens("abcde") == 2


MESSAGES = st.dictionaries(
    st.sampled_from(["role", "content", "é", "id"]),
    st.one_of(st.text(max_size=20), st.integers(), st.floats(allow_nan=False), st.none()),
)


@given(st.lists(MESSAGES, max_size=12), st.lists(st.tuples(st.integers(0, 11), MESSAGES)))
def test_a_session_serializer_writes_each_request_as_serialize_does(
    messages: list[dict[str, object]], edits: list[tuple[int, dict[str, object]]]
) -> None:
    """Each request repeats the one before, with messages replaced by other objects and
    one by a changed copy (what the pipeline gives back for the results it rewrote)."""
    serializer = Serializer()
    request = list(messages)
    for at, replacement in edits:
        assert serializer(request) == serialize(request)
        if request:
            request[at % len(request)] = replacement
            request.append(replacement)
            request[0] = {**request[0], "content": "changed"}
    assert serializer(request) == serialize(request)


@given(st.text(max_size=200), st.text(max_size=200), st.text(max_size=50), st.integers(1, 64))
def test_common_prefix_matches_the_obvious_definition(
    a: str, b: str, shared: str, chunk: int
) -> None:
    for x, y in ((a, b), (shared + a, shared + b)):
        expected = next(
            (i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y))
        )
        assert common_prefix_length(x, y) == expected
        assert common_prefix_length(x, y, chunk=chunk) == expected  # across chunk edges


def test_a_request_after_the_cache_lifetime_writes_its_whole_prompt_again() -> None:
    first = "a" * 400
    second = first + "b" * 400
    third = second + "c" * 400
    at = [0.0, 299.0, 299.0 + 301.0]  # the second within 5 minutes, the third after
    _, warm, expired = request_costs([first, second, third], A5, times=at)
    assert (warm.cached_tokens, warm.expired) == (100, False)
    assert (expired.cached_tokens, expired.expired) == (0, True)
    assert expired.cost == pytest.approx(1.25 * 300)
    # An hour's cache is still there; unknown times and no lifetime never expire.
    assert not request_costs([first, second, third], PRICING["anthropic-1h"], times=at)[2].expired
    assert not request_costs([first, second, third], A5, times=[0.0, None, 900.0])[2].expired
    forever = replace(A5, lifetime=None)
    assert request_costs([first, second, third], forever, times=at)[2].cached_tokens == 200
