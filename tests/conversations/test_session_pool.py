"""The session pool: one pipeline per conversation, none trusted after it went idle, and
released when the client says the session ended."""

from __future__ import annotations

from pathlib import Path

from middleware import load_policy
from middleware.conversations.sessions import SessionPool
from middleware.plugin.host import PluginHost


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_session_idle_too_long_gets_a_new_pipeline_on_its_next_request(tmp_path: Path) -> None:
    clock = Clock()
    pool = SessionPool(PluginHost.create(load_entrypoints=False), 60, clock)
    policy = load_policy(None, overrides={"spill.root": str(tmp_path)}, dotenv_path=False)
    first = pool.pipeline("default", policy, "s")
    clock.now = 59
    assert pool.pipeline("default", policy, "s") is first
    clock.now = 59 + 61  # idle longer than the pool keeps it: gc may have removed its files
    renewed = pool.pipeline("default", policy, "s")
    assert renewed is not first and len(pool) == 1
    pool.close()


def test_ending_a_session_releases_its_pipelines_under_every_policy(tmp_path: Path) -> None:
    pool = SessionPool(PluginHost.create(load_entrypoints=False), 3600)
    policy = load_policy(None, overrides={"spill.root": str(tmp_path)}, dotenv_path=False)
    pool.pipeline("default", policy, "s")
    pool.pipeline("strict", policy, "s")
    other = pool.pipeline("default", policy, "t")
    assert pool.end("s") == 2
    assert pool.end("s") == 0
    assert len(pool) == 1 and pool.pipeline("default", policy, "t") is other
    pool.close()
