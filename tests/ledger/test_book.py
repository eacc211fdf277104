"""The ledger's accounts: per session, in total, bounded, with models it cannot price."""

from __future__ import annotations

from record_builders import records_in

import middleware
from middleware.ledger import Ledger, LedgerSettings, Usage
from middleware.policy.settings import bind


def settings(**prices: dict[str, float]) -> LedgerSettings:
    overrides = {f"ledger.prices.{name}": entry for name, entry in prices.items()}
    return bind(
        middleware.load_policy(None, env={}, dotenv_path=False, overrides=overrides), LedgerSettings
    )


def test_sessions_and_totals_add_up_and_unpriced_models_count_tokens_only() -> None:
    ledger = Ledger(records_in())
    prices = settings(house={"input": 1, "output": 2, "cache_read": 0.1,
                             "cache_write_5m": 1.25, "cache_write_1h": 2})  # fmt: skip
    ledger.record("a", "anthropic", Usage(1_000_000, 0, 0, 0, 10), "house", prices, now=1.0)
    ledger.record("a", "anthropic", Usage(0, 2_000_000, 0, 0, 0), "house", prices, now=5.0)
    ledger.record("b", "anthropic", Usage(10, 0, 0, 0, 0), "unknown-model", prices, now=6.0)
    ledger.record("b", "anthropic", None, None, prices, now=7.0)
    a = ledger.session("a")
    assert a is not None and a["requests"] == 2 and a["billed"]["dollars"] == 1.20002
    assert a["billed"]["cache_read"] == 2_000_000 and (a["first"], a["last"]) == (1.0, 5.0)
    assert a["saved_dollars"] == 0 and a["ratio"] == 1.0  # no footprints: sent as they came
    b = ledger.session("b")
    assert b is not None and b["unpriced"] == 1 and b["unread"] == 1
    assert b["billed"]["input"] == 10 and b["billed"]["dollars"] == 0
    total = ledger.total()
    assert (
        total["requests"] == 4 and total["sessions"] == 2 and total["billed"]["input"] == 1_000_010
    )
    assert ledger.session("c") is None


def test_every_session_is_kept_and_the_estimates_memory_is_bounded() -> None:
    """The records keep every session billed; what estimating needs of the previous
    request is kept for ``max_sessions`` sessions, the least recently billed forgotten."""
    ledger = Ledger(records_in(), max_sessions=2)
    prices = settings()
    for name in ("a", "b", "a", "c"):
        ledger.record(name, "openai", Usage(1, 0, 0, 0, 1), "gpt-4.1", prices)
    assert all(ledger.session(name) is not None for name in "abc")
    assert ledger.total()["requests"] == 4 and ledger.total()["sessions"] == 3
    assert list(ledger._estimating) == ["a", "c"]


def test_a_policy_adds_to_the_price_table_and_patterns_take_the_longest() -> None:
    prices = settings(**{"*my-model*": {"input": 9, "output": 9, "cache_read": 9,
                                       "cache_write_5m": 9, "cache_write_1h": 9}})  # fmt: skip
    assert prices.entry("vendor/my-model-2")[0] == "*my-model*"  # type: ignore[index]
    assert prices.entry("claude-sonnet-5-5")[0] == "*claude-sonnet-5-5*"  # type: ignore[index]
    assert prices.entry("claude-sonnet-5")[0] == "*claude-sonnet-5*"  # type: ignore[index]
    assert prices.entry("anthropic/claude-opus-4-1")[1].input == 15  # type: ignore[index]
    assert prices.entry(None) is None and prices.entry("llama") is None


HOUSE = {"input": 1, "output": 2, "cache_read": 0.1, "cache_write_5m": 1.25, "cache_write_1h": 2}


def test_read_backs_are_charged_as_simulate_charges_a_forced_re_read() -> None:
    """A request carrying a read-back costs one more request: the one before it read from
    the cache again, and what was read back written to it (at the tokens per character the
    provider counted for the request); the effective saving subtracts it."""
    ledger = Ledger(records_in())
    prices = settings(house=HOUSE)
    ledger.record("s", "anthropic", Usage(0, 9_000, 1_000, 0, 50), "house", prices, now=1.0)
    entry = ledger.record(
        "s",
        "anthropic",
        Usage(0, 10_000, 2_000, 0, 50),
        "house",
        prices,
        now=2.0,
        body_chars=48_000,
        readbacks=[4_000, 2_000],
    )
    assert entry is not None
    # 12,000 prompt tokens for 48,000 characters: 0.25 a character; 6,000 characters read
    # back are 1,500 tokens written, and the 10,000-token request before is read again.
    assert (entry.readbacks, entry.readback_tokens) == (2, 10_000 + 1_500)
    assert entry.dollars_readback == (10_000 * 0.1 + 1_500 * 1.25) / 1e6
    session = ledger.session("s")
    assert session is not None and session["readbacks"]["count"] == 2
    assert session["effective_saved_dollars"] == round(
        session["saved_dollars"] - entry.dollars_readback, 6
    )
    # An OpenAI request writes nothing to the cache: what is read back is input.
    ledger.record("o", "openai", Usage(8_000, 0, 0, 0, 5), "house", prices, now=1.0)
    openai = ledger.record(
        "o",
        "openai",
        Usage(9_000, 0, 0, 0, 5),
        "house",
        prices,
        now=2.0,
        body_chars=36_000,
        readbacks=[400],
    )
    assert openai is not None and openai.dollars_readback == (8_000 * 0.1 + 100 * 1) / 1e6
