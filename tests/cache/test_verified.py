"""What a step verified against the spill store is kept across requests, except a reading
for which a file was missing: the file may be written later, and then the text must be
recognised, as it would be without the cache."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import middleware
from middleware.cache import DerivedCache
from middleware.formats import get_codec
from middleware.plugin.context import Internal, StepContext, verified
from middleware.plugin.host import PluginHost
from middleware.spill import SpillWorkspace
from middleware.spill.remembered import RememberedStore


def context(store: object, cache: DerivedCache) -> StepContext:
    """A step's context over ``store``: the session's own when it remembers (as a
    conversation holds its store), else a store the context only has."""
    policy = middleware.load_policy(None, env={}, dotenv_path=False)
    own = store if isinstance(store, RememberedStore) else None
    internal = Internal("budget", PluginHost.create(), cache=cache, store=own)
    return StepContext(policy, get_codec("anthropic"), "s", store, internal=internal)  # type: ignore[arg-type]


def reader(location: str, reads: list[str]) -> Callable[[Callable[[str], str | None]], str | None]:
    def read(load: Callable[[str], str | None]) -> str | None:
        reads.append(location)
        return load(location)

    return read


def test_a_reading_that_found_its_file_is_reused(tmp_path: Path) -> None:
    workspace = SpillWorkspace("s", tmp_path)
    path = workspace.save("call_1", "the full text")
    ctx = context(RememberedStore(workspace, DerivedCache(1 << 20)), DerivedCache(1 << 20))
    reads: list[str] = []
    for _ in range(3):
        assert verified(ctx, ("k", "text"), reader(path, reads), lambda _: 10) == "the full text"
    assert reads == [path]


def test_a_reading_that_missed_a_file_is_done_again(tmp_path: Path) -> None:
    workspace = SpillWorkspace("s", tmp_path)
    content = "written later"
    real = workspace.save("call_1", content)
    away = Path(real).rename(real + ".away")  # not there yet
    cache = DerivedCache(1 << 20)
    ctx = context(RememberedStore(workspace, DerivedCache(1 << 20)), cache)
    reads: list[str] = []
    assert verified(ctx, ("k", "text"), reader(real, reads), lambda _: 10) is None
    away.rename(real)  # now it is
    assert verified(ctx, ("k", "text"), reader(real, reads), lambda _: 10) == content
    assert reads == [real, real]


def test_a_store_a_plugin_provides_is_asked_every_time(tmp_path: Path) -> None:
    workspace = SpillWorkspace("s", tmp_path)
    path = workspace.save("call_1", "text")
    ctx = context(workspace, DerivedCache(1 << 20))  # not the pipeline's own store
    reads: list[str] = []
    for _ in range(2):
        assert verified(ctx, ("k",), reader(path, reads), lambda _: 1) == "text"
    assert reads == [path, path]
