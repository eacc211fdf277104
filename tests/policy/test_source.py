"""One holder of a host's policy (issue 47, item 1): the proxy's sources and a
:class:`~middleware.Pipeline` watch, swap and tell through the same
:class:`~middleware.policy.source.PolicySource`."""

from __future__ import annotations

from pathlib import Path

import pytest
from waiting import wait_for

import middleware
from middleware.policy.source import PolicySource
from middleware.report import ProblemReport

PLAIN = "version: 1\nname: {name}\n"


class Told:
    """A listener that records each swap, and what the source held while it was told."""

    def __init__(self) -> None:
        self.source: PolicySource | None = None
        self.swaps: list[tuple[str, str, str]] = []

    def policy_reloaded(
        self, old: middleware.Policy, new: middleware.Policy, problems: list[ProblemReport]
    ) -> None:
        assert self.source is not None
        self.swaps.append((old.name, new.name, self.source.policy.name))


def test_a_loaded_policy_is_held_not_watched() -> None:
    policy = middleware.load_policy(None, env={}, dotenv_path=False)
    source = PolicySource("mine", policy)
    followed: list[str] = []
    source.follow(lambda new: followed.append(new.name))
    assert source.policy is policy and source.watcher is None
    assert (source.status.generation, source.status.digest) == (1, policy.digest)
    with pytest.raises(RuntimeError, match="not watched"):
        source.reload()
    other = middleware.load_policy(None, env={}, dotenv_path=False, overrides={"name": "other"})
    source.replace(other)  # a host reloading its policy itself: followers told, no hook
    assert source.policy is other and followed == ["other"]
    assert source.status.digest == other.digest
    source.close()


def test_a_file_is_watched_and_each_swap_told_once_then_followed(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(PLAIN.format(name="one"), encoding="utf-8")
    told = Told()
    source = PolicySource("file", path, told)
    told.source = source
    order: list[str] = []
    source.follow(lambda new: order.append(f"followed {new.name}"))
    try:
        assert source.policy.name == "one" and source.watcher is not None
        path.write_text(PLAIN.format(name="two"), encoding="utf-8")
        assert wait_for(lambda: order == ["followed two"], 10)
        assert told.swaps == [("one", "two", "two")]  # told after the swap, once
        assert source.status.generation == 2
    finally:
        source.close()


def test_a_pipeline_holds_its_policy_in_a_source(tmp_path: Path) -> None:
    """The facade's policy is its source's: replace_policy reaches the calls that start
    from then on, as a swap does."""
    first = middleware.load_policy(None, env={}, dotenv_path=False, overrides={"name": "first"})
    second = middleware.load_policy(None, env={}, dotenv_path=False, overrides={"name": "second"})
    history = [{"role": "user", "content": "hi"}]
    with middleware.Pipeline(first) as pipe:
        assert pipe.process(history).report.policy == "first"
        pipe.replace_policy(second)
        assert pipe.policy is second and pipe.policy_status.digest == second.digest
        assert pipe.process(history).report.policy == "second"
