"""The proxy and the SDK integrations keep one cache for all their sessions."""

from __future__ import annotations

from middleware.conversations import engine
from middleware.conversations.sessions import SessionPool
from middleware.plugin.host import PluginHost
from middleware.policy import load_policy


def test_every_session_of_a_pool_shares_one_cache_of_the_policys_size() -> None:
    policy = load_policy(
        None, env={}, dotenv_path=False, overrides={"cache": {"max_bytes": 5_000_000}}
    )
    pool = SessionPool(PluginHost.create(), idle_seconds=60)
    first = pool.conversation("default", policy, "alice")
    second = pool.conversation("default", policy, "bob")
    assert first is not second
    assert first.cache is second.cache is pool.cache
    assert first.cache.max_bytes == 5_000_000
    history = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    engine.process(first, history)
    hits = first.cache.stats().hits
    engine.process(second, [dict(m) for m in history])  # another session, the same messages
    assert second.cache.stats().hits > hits
    first.close()
    second.close()
