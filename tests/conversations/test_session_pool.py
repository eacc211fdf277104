"""The session pool: one pipeline per conversation, none trusted after it went idle, and
released when the client says the session ended."""

from __future__ import annotations

import gc
import json
import pickle
import weakref
from pathlib import Path
from typing import Any

import pytest

from middleware import Pipeline, Policy, load_policy
from middleware.cache import DerivedCache
from middleware.conversations import engine
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
    first = pool.conversation("default", policy, "s")
    clock.now = 59
    assert pool.conversation("default", policy, "s") is first
    clock.now = 59 + 61  # idle longer than the pool keeps it: gc may have removed its files
    renewed = pool.conversation("default", policy, "s")
    assert renewed is not first and len(pool) == 1
    pool.close()


def test_ending_a_session_releases_its_pipelines_under_every_policy(tmp_path: Path) -> None:
    pool = SessionPool(PluginHost.create(load_entrypoints=False), 3600)
    policy = load_policy(None, overrides={"spill.root": str(tmp_path)}, dotenv_path=False)
    pool.conversation("default", policy, "s")
    pool.conversation("strict", policy, "s")
    other = pool.conversation("default", policy, "t")
    assert pool.end("s") == 2
    assert pool.end("s") == 0
    assert len(pool) == 1 and pool.conversation("default", policy, "t") is other
    pool.close()


# -- the state the pipelines keep, under a byte budget (issue 26, item 3) ------------------


def conversation(name: str, turns: int) -> list[dict[str, Any]]:
    """Anthropic: ``turns`` turns of one Bash call and a result of its own; every third
    is over the result cap (spilled)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Task {name}."}]
    for i in range(turns):
        size = 9_000 if i % 3 == 0 else 2_000
        call = {
            "type": "tool_use",
            "id": f"toolu_{name}_{i:03}",
            "name": "Bash",
            "input": {"command": f"make step{i}"},
        }
        text = "\n".join(f"{name} step {i} line {n}: ok" for n in range(size // 25))
        messages.append({"role": "assistant", "content": [call]})
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": text}],
            }
        )
    return messages


def busy_policy(root: Path, **overrides: Any) -> Policy:
    schedule = {"trigger_tokens": 2_000, "step_turns": 2, "min_reclaim_tokens": 200}
    merged = {
        "microcompact": {"schedule": schedule},
        "spill": {"root": str(root), "keep": True},
        **overrides,
    }
    return load_policy(None, env={}, overrides=merged, dotenv_path=False)


def test_over_its_budget_the_pool_forgets_the_sessions_used_least_recently(
    tmp_path: Path,
) -> None:
    pool = SessionPool(PluginHost.create(load_entrypoints=False), 3600)
    policy = busy_policy(tmp_path)
    pipes = {name: pool.conversation("default", policy, name) for name in ("a", "b", "c")}
    for name, pipe in pipes.items():
        engine.process(pipe, conversation(name, 6), format="anthropic")
    held = {name: pipe.held_bytes for name, pipe in pipes.items()}
    assert all(held.values()) and pool.held_bytes == sum(held.values())
    pool.max_bytes = 2 * max(held.values())  # room for two
    pool.trim()  # a, used least recently, goes
    assert (pipes["a"].held_bytes, pool.evictions) == (0, 1)
    assert pipes["b"].held_bytes == held["b"] and pipes["c"].held_bytes == held["c"]
    # a comes back (the same pipeline: its spill workspace stays open) and b is now the
    # least recently used: its state goes when a's request has made a's again
    assert pool.conversation("default", policy, "a") is pipes["a"]
    engine.process(pipes["a"], conversation("a", 6), format="anthropic")
    assert pipes["a"].continuations.continued == 0  # processed in full, as after a restart
    assert pipes["a"].held_bytes == held["a"]
    pool.trim()
    assert pipes["b"].held_bytes == 0 and pipes["c"].held_bytes == held["c"]
    assert pool.evictions == 2 and len(pool) == 3
    pool.close()


def test_the_budget_is_kept_as_each_request_starts(tmp_path: Path) -> None:
    pool = SessionPool(PluginHost.create(load_entrypoints=False), 3600)
    policy = busy_policy(tmp_path)
    first = pool.conversation("default", policy, "a")
    engine.process(first, conversation("a", 6), format="anthropic")
    pool.max_bytes = first.held_bytes - 1  # even the one session is over it
    pool.conversation("default", policy, "b")
    assert first.held_bytes == 0 and pool.evictions == 1
    pool.max_bytes = None  # no bound
    engine.process(first, conversation("a", 7), format="anthropic")
    pool.conversation("default", policy, "b")
    assert first.held_bytes > 0 and pool.evictions == 1
    pool.close()


@pytest.mark.parametrize("freeze", [False, True], ids=["default", "freeze_decisions"])
def test_sessions_whose_state_was_forgotten_answer_as_if_it_was_kept(
    tmp_path: Path, freeze: bool
) -> None:
    """Three conversations, interleaved, through a pool that keeps every session's state
    and one whose budget keeps none: the same bytes, request after request, and the same
    reports, but for frozen decisions, which a forgotten session makes again (a result
    reported spilled again where the other reports its decision replayed, as after a
    restart)."""
    policy = busy_policy(tmp_path, budget={"freeze_decisions": freeze})
    host = PluginHost.create(load_entrypoints=False)
    outputs: dict[str, list[str]] = {}
    for label, budget in (("kept", None), ("squeezed", 1)):
        pool = SessionPool(host, 3600, max_bytes=budget)
        seen = outputs[label] = []
        for turns in range(2, 12):
            for name in ("a", "b", "c"):
                pipe = pool.conversation("default", policy, name)
                result = engine.process(pipe, conversation(name, turns), format="anthropic")
                report = json.loads(result.report.to_json())
                for action in report["actions"]:
                    if freeze and action["kind"] in ("decision_replayed", "spilled"):
                        action.update(kind="decided", detail={})
                seen.append(json.dumps(result.output) + json.dumps(report))
                pool.trim()
        if budget is None:
            assert pool.evictions == 0
        else:
            assert pool.evictions >= 29 and pool.held_bytes == 0
        pool.close()
    assert outputs["squeezed"] == outputs["kept"]


def test_a_forgotten_session_decides_again_as_a_restarted_process_would(
    tmp_path: Path,
) -> None:
    """The documented difference: frozen decisions survive a policy reload in a session
    that kept its state, not in one that was forgotten, which is then what a restarted
    proxy would send (the prompt cache breaks once, as it would on a restart); the text
    spilled before is still on the store."""
    before = busy_policy(tmp_path, budget={"freeze_decisions": True})
    after = busy_policy(tmp_path, budget={"freeze_decisions": True, "max_result_chars": 1_000})
    host = PluginHost.create(load_entrypoints=False)
    kept = SessionPool(host, 3600)
    forgotten = SessionPool(host, 3600, max_bytes=0)
    for pool in (kept, forgotten):
        engine.process(
            pool.conversation("default", before, "s"), conversation("s", 4), format="anthropic"
        )
        pool.trim()
    later = conversation("s", 5)
    kept_out = engine.process(
        kept.conversation("default", after, "s"), later, format="anthropic"
    ).output
    forgot_out = engine.process(
        forgotten.conversation("default", after, "s"), later, format="anthropic"
    )
    with Pipeline(after, host=host, session_id="s", cache=DerivedCache(0)) as restarted:
        assert forgot_out.output == restarted.process(later, format="anthropic").output
    assert forgot_out.output != kept_out
    for pipe in (
        kept.conversation("default", after, "s"),
        forgotten.conversation("default", after, "s"),
    ):
        store = pipe.spill.provided
        for action in (a for a in forgot_out.report.actions if a.kind == "spilled"):
            assert store.load(action.detail["path"]) is not None
    kept.close()
    forgotten.close()


def test_ending_a_session_lets_its_pipeline_and_state_be_collected(tmp_path: Path) -> None:
    pool = SessionPool(PluginHost.create(load_entrypoints=False), 3600)
    policy = busy_policy(tmp_path)
    ended = pool.conversation("default", policy, "s")
    engine.process(ended, conversation("s", 8), format="anthropic")
    other = pool.conversation("default", policy, "t")
    engine.process(other, conversation("t", 8), format="anthropic")
    ((previous, _),) = ended.continuations._by_opening.values()
    refs = [weakref.ref(x) for x in (ended, previous, previous.nodes[-1], ended.spill.provided)]
    keys = [pickle.dumps(message, 5) for message in conversation("s", 8)]  # the cache's keys
    assert all(("message", key) in pool.cache for key in keys)  # type: ignore[operator]
    del ended, previous
    assert pool.end("s") == 1
    gc.collect()
    assert [ref() for ref in refs] == [None] * len(refs)
    cache = pool.cache
    assert cache is not None
    assert not any(("message", key) in cache for key in keys)
    assert engine.process(other, conversation("t", 9), format="anthropic").continued
    pool.close()
