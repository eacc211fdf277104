"""Each built-in step is a plugin like any other: blocking one (``CHATCLI_BLOCK_PLUGINS``, as
docs/plugins.md allows) takes away its own guarantee and no other (issue 26, item 11; issue
29, "steps as plugins").

The budget step learns what compaction will do only through the ``compact_before_spill``
hook: with microcompaction blocked, nobody promises anything, and the budget step keeps the
request inside the window on its own instead of counting on a compaction that never runs.
"""

from __future__ import annotations

import ast
import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from locations import REPO

import middleware
from middleware.plugin.host import BLOCK_PLUGINS_ENV, DEFAULT_PLUGINS, STEPS, PluginHost
from tests.preset_builders import batch, spilled_text

PAIRING = "middleware.steps.pairing"
BUDGET = "middleware.steps.budget"
MICROCOMPACT = "middleware.steps.microcompact"
WINDOW = "budget.context_aware.window_tokens"
#: The hermes preset's window in the issue: 32,768 tokens of 4 characters.
WINDOW_CHARS = 32_768 * 4
#: What blocking each step is equivalent to: its policy switched off (for microcompaction,
#: also the budget step's counting on it).
DISABLED: dict[str, dict[str, Any]] = {
    PAIRING: {"pairing.enabled": False},
    BUDGET: {"budget.enabled": False},
    MICROCOMPACT: {
        "microcompact.enabled": False,
        "budget.context_aware.compact_before_spill": False,
    },
}


@contextmanager
def pipeline(
    policy: str | None, tmp_path: Path, *, block: tuple[str, ...] = (), **overrides: Any
) -> Iterator[middleware.Pipeline]:
    """A pipeline on ``policy`` with the built-in plugins but those in ``block``, blocked
    the way an operator blocks them."""
    host = PluginHost.create(load_entrypoints=False, env={"CHATCLI_BLOCK_PLUGINS": ",".join(block)})
    loaded = middleware.load_policy(
        policy, env={}, dotenv_path=False, overrides={"spill.root": str(tmp_path), **overrides}
    )
    with middleware.Pipeline(loaded, host=host, session_id="blocked") as pipe:
        yield pipe


def lines(n_chars: int, tag: str) -> str:
    line = f"{tag} " + "d" * 75 + "\n"
    return (line * (n_chars // len(line) + 1))[:n_chars]


def session(*sizes: int, tool: str = "bash") -> list[dict[str, Any]]:
    """One call per turn, whose result has ``sizes[i]`` characters (ids t0, t100, ...)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Look around."}]
    for i, size in enumerate(sizes):
        messages = batch((f"{tool}{i}", lines(size, f"turn{i}")), before=messages)
    return messages


def interrupted(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with a last turn whose second call never got its result (an agent
    interrupted while the tool ran)."""
    return [
        *messages,
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "x1", "name": "grep", "input": {}},
                {"type": "tool_use", "id": "x2", "name": "bash", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "x1", "content": lines(9_000, "grep")},
            ],
        },
    ]


def results(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {
        block["tool_use_id"]: block["content"]
        for message in messages
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    }


def sent(messages: list[dict[str, Any]]) -> int:
    """Characters of the request body's history, as JSON (an upper bound of what the
    steps count)."""
    return len(json.dumps(messages, ensure_ascii=False))


def kinds(result: middleware.ProcessResult) -> list[tuple[str, str, str | None]]:
    return [(a.step, a.kind, a.tool_name) for a in result.report.actions]


# -- the reproduction -------------------------------------------------------------


def test_budget_keeps_the_window_when_microcompaction_is_blocked(tmp_path: Path) -> None:
    """Preset hermes, a 32,768-token window, five results of 30,000 characters: with the
    microcompaction step loaded the two oldest are summarised; blocked, it promises
    nothing, and the fifth result is spilled instead of the 150,000 characters going out
    whole."""
    messages = session(30_000, 30_000, 30_000, 30_000, 30_000)
    with pipeline("preset:hermes", tmp_path / "loaded", **{WINDOW: 32_768}) as pipe:
        loaded = pipe.process(messages)
    assert loaded.report.result_chars_before == 150_000
    # Three results whole and two one-line summaries (90,286 characters with the spill
    # root of the run: a summary names its file).
    assert 3 * 30_000 < loaded.report.result_chars_after < 3 * 30_000 + 2 * 300
    assert ("microcompact", "summarized", "bash0") in kinds(loaded)
    with pipeline(
        "preset:hermes", tmp_path / "alone", block=(MICROCOMPACT,), **{WINDOW: 32_768}
    ) as pipe:
        alone = pipe.process(messages)
        assert pipe.process(alone.messages).messages == alone.messages
        assert spilled_text(results(alone.messages)["t400"]) == lines(30_000, "turn4")
    assert alone.report.result_chars_after < WINDOW_CHARS
    assert sent(alone.messages) < WINDOW_CHARS
    assert kinds(alone) == [("budget", "spilled", "bash4")]
    (spilled,) = alone.report.actions
    assert spilled.detail["cap"] < WINDOW_CHARS - 4 * 30_000  # what the window had left
    assert not alone.report.problems


@pytest.mark.parametrize(
    "sizes",
    [
        (30_000,) * 5,
        (30_000,) * 6,
        (25_000, 25_000, 25_000, 25_000, 35_000),
        (20_000,) * 8,
        (40_000, 500, 40_000, 500, 40_000),
    ],
)
def test_budget_alone_decides_as_when_told_not_to_count_on_compaction(
    tmp_path: Path, sizes: tuple[int, ...]
) -> None:
    """With microcompaction blocked, the hermes budget makes exactly the decisions of a
    policy that turns compaction before spill off: each turn keeps at most what the window
    had left before it (never below the floor)."""
    messages = session(*sizes)
    with pipeline("preset:hermes", tmp_path, block=(MICROCOMPACT,), **{WINDOW: 32_768}) as pipe:
        alone = pipe.process(messages)
    off = {WINDOW: 32_768, "budget.context_aware.compact_before_spill": False}
    with pipeline("preset:hermes", tmp_path, **off) as pipe:
        told = pipe.process(messages)
    assert alone.messages == told.messages
    assert kinds(alone) == kinds(told)


def test_what_was_promised_is_what_the_budget_counts_on(tmp_path: Path) -> None:
    """The budget step's caps trust the promise: a plugin that promises the built-in
    compaction's reclaim without keeping it sends the 150,000 characters (the issue's
    failure), which is why nothing but a loaded compaction may answer."""

    class Hollow:
        @middleware.hookimpl
        def compact_before_spill(self, index: Any, before_turn: int, context: Any) -> int:
            return sum(len(s.result.text) - 300 for s in index.results if s.turn < before_turn)

    host = PluginHost.create(load_entrypoints=False, env={"CHATCLI_BLOCK_PLUGINS": MICROCOMPACT})
    host.register(Hollow(), name="hollow")
    policy = middleware.load_policy(
        "preset:hermes",
        env={},
        dotenv_path=False,
        overrides={"spill.root": str(tmp_path), WINDOW: 32_768},
    )
    with middleware.Pipeline(policy, host=host) as pipe:
        result = pipe.process(session(30_000, 30_000, 30_000, 30_000, 30_000))
    assert result.report.result_chars_after == 150_000 > WINDOW_CHARS


# -- one test per blocked step ------------------------------------------------------------


def histories() -> list[list[dict[str, Any]]]:
    """A hermes-sized session, a long session of mid-sized results, and both with a
    missing result to repair."""
    hermes = session(30_000, 30_000, 30_000, 30_000, 30_000)
    long = session(*[7_000] * 8, tool="read")
    return [hermes, long, interrupted(hermes), interrupted(long)]


@pytest.mark.parametrize("blocked", [PAIRING, BUDGET, MICROCOMPACT])
@pytest.mark.parametrize(
    ("policy", "overrides"),
    [
        ("preset:hermes", {WINDOW: 32_768}),
        ("preset:hermes", {WINDOW: 32_768, "microcompact.enabled": True}),
        (None, {}),
        (None, {"microcompact.schedule.window_tokens": 20_000}),
        ("preset:claude-code", {}),
    ],
)
def test_blocking_a_step_is_switching_it_off_the_others_unchanged(
    tmp_path: Path, blocked: str, policy: str | None, overrides: dict[str, Any]
) -> None:
    """Blocking one step gives the output and the report the policy gives with that step
    switched off: the other steps work as they do with it loaded. The input is never
    touched and processing the output again changes nothing."""
    for i, messages in enumerate(histories()):
        before = copy.deepcopy(messages)
        with pipeline(policy, tmp_path / f"{i}", block=(blocked,), **overrides) as pipe:
            alone = pipe.process(messages)
            again = pipe.process(alone.messages)
        with pipeline(policy, tmp_path / f"{i}", **{**overrides, **DISABLED[blocked]}) as pipe:
            off = pipe.process(messages)
        assert messages == before
        assert alone.messages == off.messages, f"history {i}"
        assert kinds(alone) == kinds(off)
        assert not alone.report.problems
        step = next(s.name for s in STEPS if blocked.endswith(f".{s.name}"))
        assert not alone.report.by_step(step)
        if blocked != PAIRING:  # a broken history stays broken with pairing blocked
            assert again.messages == alone.messages


def test_pairing_still_repairs_when_the_other_steps_are_blocked(tmp_path: Path) -> None:
    messages = interrupted(session(3_000, 3_000))
    with pipeline(None, tmp_path, block=(BUDGET, MICROCOMPACT)) as pipe:
        result = pipe.process(messages)
    assert [a.kind for a in result.report.actions] == ["synthetic_result"]
    assert results(result.messages)["x2"].startswith("[Tool result missing")
    assert results(result.messages)["x1"] == lines(9_000, "grep")  # no budget: whole


def test_budget_still_caps_results_and_turns_with_the_other_steps_blocked(
    tmp_path: Path,
) -> None:
    """Per-result cap and per-turn budget, with neither pairing nor microcompaction: the
    interrupted call stays unanswered, the results are bounded all the same."""
    turn = batch(("a", lines(40_000, "a")), ("b", lines(9_000, "b")), ("c", lines(9_000, "c")))
    messages = interrupted(turn)
    overrides = {"budget.max_result_chars": 10_000, "budget.turn_budget_chars": 15_000}
    with pipeline(None, tmp_path, block=(PAIRING, MICROCOMPACT), **overrides) as pipe:
        result = pipe.process(messages)
        texts = results(result.messages)
        assert spilled_text(texts["t0"]) == lines(40_000, "a")
    assert "x2" not in texts  # not repaired
    assert len(texts["t0"]) <= 10_000
    assert sum(len(texts[i]) for i in ("t0", "t1", "t2")) <= 15_000
    assert {a.step for a in result.report.actions} == {"budget"}


def test_nothing_bounds_an_output_admitted_with_the_budget_blocked(tmp_path: Path) -> None:
    """Admission is the budget plugin's own hook (``admit_outputs``): blocked, an output
    goes in as it came, and the pipeline says results are not bounded."""
    output = lines(40_000, "a")
    with pipeline(None, tmp_path, block=(BUDGET,)) as pipe:
        admitted = pipe.admit("Bash", "t1", output)
    assert (admitted.text, admitted.budget, admitted.actions) == (output, None, ())
    assert not admitted.problems


def test_microcompaction_still_fits_its_window_with_the_budget_blocked(tmp_path: Path) -> None:
    """No result is capped, yet old ones are compacted by age and the request is brought
    under ``microcompact.schedule.window_tokens``; each compacted text names its file."""
    messages = session(*[12_000] * 10, tool="read")
    assert sent(messages) > 80_000
    overrides = {"microcompact.schedule.window_tokens": 20_000}
    with pipeline(None, tmp_path, block=(BUDGET,), **overrides) as pipe:
        result = pipe.process(messages)
        compacted = [a for a in result.report.actions if a.kind in ("truncated", "summarized")]
        assert compacted
        for action in compacted:
            text = results(result.messages)[action.tool_call_id]
            n = int(action.tool_call_id[1:]) // 100
            assert spilled_text(text) == lines(12_000, f"turn{n}")
    assert sent(result.messages) <= 20_000 * 4
    assert {a.step for a in result.report.actions} == {"microcompact"}


def test_a_blocked_compaction_answers_no_hook() -> None:
    host = PluginHost.create(load_entrypoints=False, env={"CHATCLI_BLOCK_PLUGINS": MICROCOMPACT})
    assert MICROCOMPACT not in {p.name for p in host.plugins()}
    assert not host.implements("compact_before_spill")
    assert not host.implements("microcompact")
    assert host.implements("enforce_budget")
    loaded = PluginHost.create(load_entrypoints=False, env={})
    (plugin,) = [p for p in loaded.plugins() if p.name == MICROCOMPACT]
    assert plugin.hooks == ("compact_before_spill", "microcompact")


# -- no step imports another --------------------------------------------------------------


def imported(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def plugin_files(plugin: str) -> list[Path]:
    """The source files of a built-in plugin: its module, or its package's modules."""
    path = REPO.joinpath(*plugin.split("."))
    return sorted(path.glob("*.py")) if path.is_dir() else [path.with_suffix(".py")]


@pytest.mark.parametrize("plugin", DEFAULT_PLUGINS)
def test_no_builtin_plugin_imports_another(plugin: str) -> None:
    """Blocking one takes nothing from another: what two plugins share is in a module of
    its own (steps/notices.py, steps/previews.py...), never in a plugin (issue 37, item 2:
    the budget and microcompaction steps took ``without_notices`` from the loop guard)."""
    others = tuple(other for other in DEFAULT_PLUGINS if other != plugin)
    for path in plugin_files(plugin):
        for module in imported(path):
            assert not any(module == o or module.startswith(f"{o}.") for o in others), (
                f"{path.relative_to(REPO)} imports {module}"
            )


def test_the_pipeline_imports_nothing_from_the_steps() -> None:
    """The pipeline reaches every built-in step only as a plugin: the steps through their
    hooks, the budget step's dispatch-time cap through ``result_cap``, the loop guard
    through ``loop_alerts`` (issue 29, item 2)."""
    modules = imported(REPO / "middleware" / "pipeline.py")
    assert not [m for m in modules if m.startswith("middleware.steps")]


def test_blocking_the_loop_guard_leaves_the_steps_and_reports_no_alert(tmp_path: Path) -> None:
    """The loop guard is a plugin like the steps: blocked, the turn's repeated calls raise
    no alert, and the history is processed as before."""
    repeated = [{"role": "user", "content": "go"}]
    for i in range(6):
        repeated += [
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": f"t{i}", "name": "ls", "input": {"path": "."}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{i}", "content": "a.py"}]},
        ]  # fmt: skip
    policy = middleware.load_policy(
        None,
        env={},
        dotenv_path=False,
        overrides={"spill": {"root": str(tmp_path)}, "loop_guard": {"max_identical_calls": 2}},
    )
    guarded = middleware.Pipeline(policy, host=PluginHost.create(load_entrypoints=False))
    without = {BLOCK_PLUGINS_ENV: "middleware.steps.loop_guard"}
    blocked = middleware.Pipeline(
        policy, host=PluginHost.create(load_entrypoints=False, env=without)
    )
    with guarded, blocked:
        alerted, quiet = guarded.process(repeated), blocked.process(repeated)
    assert [a.kind for a in alerted.report.loop_alerts] == ["repeated_call"]
    assert quiet.report.loop_alerts == [] and quiet.report.problems == []
