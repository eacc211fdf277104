"""A session's spill store says what it is (issue 47, item 1): the conversation asks it,
not which class it is."""

from __future__ import annotations

from pathlib import Path

import pytest
from failing_store import FailingStore

import middleware
from middleware.cache import DerivedCache
from middleware.formats import get_codec
from middleware.plugin.context import Internal, StepContext, bound_store, fork
from middleware.plugin.host import PluginHost
from middleware.plugin.spill_guard import GuardedSpillStore
from middleware.spill import SpillError, SpillWorkspace
from middleware.spill.remembered import RememberedStore
from middleware.spill.session_store import SessionStore


class PluginStore:
    """A third-party store: save, load, close, nothing more."""

    def __init__(self) -> None:
        self.saved: dict[str, str] = {}

    def save(self, key: str, content: str, *, suffix: str = ".txt") -> str:
        self.saved[f"mem://{key}{suffix}"] = content
        return f"mem://{key}{suffix}"

    def load(self, location: str) -> str | None:
        return self.saved.get(location)

    def close(self) -> None:
        self.saved.clear()


def test_the_session_workspace_remembers_and_keeps_the_record_and_readings(
    tmp_path: Path,
) -> None:
    workspace = SpillWorkspace("s", tmp_path)
    store: SessionStore = RememberedStore(workspace, DerivedCache(1 << 20))
    assert store.provided is workspace and store.local is workspace
    assert store.token is not None
    store.hold(60)  # a local folder keeps no hold: nothing to do, nothing raised
    assert store.load(store.save("call_1", "kept")) == "kept"
    store.sync()
    store.close()


def test_a_plugins_store_remembers_nothing_and_keeps_no_record() -> None:
    plugin = PluginStore()
    store: SessionStore = GuardedSpillStore(plugin, "memory")
    assert store.provided is plugin
    assert store.token is None and store.local is None
    store.hold(60)
    store.sync()
    assert store.load(store.save("call_1", "kept")) == "kept"


def test_a_call_uses_a_plugins_store_reporting_into_its_own_report(tmp_path: Path) -> None:
    """How one ``process()`` call uses the store: a plugin's reports its failures into the
    call's problems; a step run apart (a third-party hook, forked) has its own, so a
    failure after its time limit touches nothing the request uses. The workspace is
    itself."""
    policy = middleware.load_policy(None, env={}, dotenv_path=False)
    workspace = RememberedStore(SpillWorkspace("s", tmp_path), DerivedCache(1 << 20))
    assert workspace.reporting_to([], 1.0) is workspace
    guarded = GuardedSpillStore(FailingStore(), "full-disk")
    internal = Internal("budget", PluginHost.create(load_entrypoints=False), store=guarded)
    spill = bound_store(internal, policy)
    assert spill is not None and spill is not guarded
    context = StepContext(policy, get_codec("anthropic"), "s", spill, internal=internal)
    forked = fork(context)
    for ctx in (forked, context):
        with pytest.raises(SpillError):
            ctx.spill.save("call_1", "text")
    assert len(context.internal.problems) == 1 and len(forked.internal.problems) == 1
    assert context.internal.problems[0].plugin == "full-disk"
