"""A conversation's state owns what is kept between its requests: the engine uses the
parts, the state closes them (issue 37, item 1; issue 47, item 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware.cache import DerivedCache
from middleware.conversations import engine
from middleware.conversations.state import ConversationState
from middleware.plugin.host import PluginHost
from middleware.spill.layout import session_folder_name


def spilling(session: str) -> list[dict[str, Any]]:
    """Anthropic: one call whose output is far over the default result budget."""
    return [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": f"{session}-1", "name": "Bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": f"{session}-1", "content": "line\n" * 20_000}
            ],
        },
    ]


def test_the_state_closes_the_parts_the_engine_only_uses(tmp_path: Path) -> None:
    policy = middleware.load_policy(
        None, env={}, dotenv_path=False, overrides={"spill.root": str(tmp_path)}
    )
    host = PluginHost.create(load_entrypoints=False)
    state = ConversationState.open(host, ("p", "s"), policy, DerivedCache(1 << 24), 0.0)
    result = engine.process(state, spilling("s"), "anthropic")
    assert any(action.kind == "spilled" for action in result.report.actions)
    folder = tmp_path / session_folder_name("s")
    assert folder.is_dir() and state.held_bytes > 0
    assert state.spill.load(state.spill.save("k", "kept"))  # the engine left them open
    state.close()  # the state: its workspace released (removed, as spill.keep is false)
    with pytest.raises(RuntimeError, match="closed"):
        engine.process(state, spilling("s"), "anthropic")
    assert not folder.exists()
    assert state.held_bytes == 0  # an answer on its way holds the state, not its memory


def test_a_pipeline_on_its_own_opens_and_closes_its_parts(tmp_path: Path) -> None:
    policy = middleware.load_policy(
        None, env={}, dotenv_path=False, overrides={"spill.root": str(tmp_path)}
    )
    with middleware.Pipeline(policy, session_id="alone") as pipe:
        pipe.process(spilling("alone"), format="anthropic")
        assert pipe.state.session == "alone" and pipe.held_bytes == pipe.state.held_bytes
        assert (tmp_path / session_folder_name("alone")).is_dir()
    assert not (tmp_path / session_folder_name("alone")).exists()
