"""A summary of an old result is made once per pipeline when no plugin summarises or names
content types: an agent sends the original result on every request, and the summary
depends on its text, its spill path and the policy alone. A plugin that does is asked on
every request. The summary is the same text with the cache on or off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware.cache import DerivedCache
from middleware.plugin.host import PluginHost
from middleware.plugin.markers import hookimpl
from middleware.steps.microcompact.settings import MicrocompactSettings

OVERRIDES = {
    "microcompact.schedule.rewrite_cost": 0,
    "microcompact.schedule.expected_turns_min": 0,
    "budget.max_result_chars": 1_000_000,
}


def history(turns: int) -> list[Any]:
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for i in range(turns):
        body = "".join(f"src/mod_{i}_{n}.py:{n}: value = compute(x)\n" for n in range(200))
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{i}", "name": "Grep", "input": {"pattern": "x"}},
        ]})  # fmt: skip
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": body},
        ]})  # fmt: skip
    return messages


class Summaries:
    def __init__(self) -> None:
        self.asked = 0

    @hookimpl
    def summarize_result(self, text: str, path: str) -> str:
        self.asked += 1
        return f"[{len(text)} characters at {path}]"


def pipeline(tmp_path: Path, **kwargs: Any) -> middleware.Pipeline:
    policy = middleware.load_policy(
        None, env={}, dotenv_path=False, overrides={**OVERRIDES, "spill.root": str(tmp_path)}
    )
    return middleware.Pipeline(policy, session_id="s", **kwargs)


def test_without_plugins_a_summary_is_made_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    made: list[str] = []
    summarize = MicrocompactSettings.summarize

    def counting(self: MicrocompactSettings, text: str, *args: Any, **kwargs: Any) -> str:
        made.append(text)
        return summarize(self, text, *args, **kwargs)

    monkeypatch.setattr(MicrocompactSettings, "summarize", counting)
    with pipeline(tmp_path) as pipe:
        first = pipe.process(history(6))
        kinds = [a.kind for a in first.report.actions]
        assert "summarized" in kinds
        count = len(made)
        again = pipe.process(history(6))
        assert len(made) == count
        assert again.messages == first.messages
        assert [a.kind for a in again.report.actions] == kinds  # still reported each time
    with pipeline(tmp_path, cache=DerivedCache(0)) as uncached:
        assert uncached.process(history(6)).messages == first.messages


def test_a_plugin_that_summarises_is_asked_every_time(tmp_path: Path) -> None:
    plugin = Summaries()
    host = PluginHost.create(load_entrypoints=False)
    host.register(plugin, name="summaries")
    with pipeline(tmp_path, host=host) as pipe:
        first = pipe.process(history(6))
        asked = plugin.asked
        assert asked > 0
        assert pipe.process(history(6)).messages == first.messages
        assert plugin.asked == 2 * asked
