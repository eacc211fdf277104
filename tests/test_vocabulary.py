"""One vocabulary (issue 47, item 4): the steps' names and the kinds of action they record
are declared once (:class:`middleware.report.Step`, :class:`middleware.report.ActionKind`).

The built-in steps, run over varied histories, record only declared kinds and every
declared kind is recorded by some history (none is dead); no module spells a kind or a
step's name as a string of its own, and the host runs the steps the names declare.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from failing_store import ProvidesFailingStore
from locations import REPO
from pairing_builders import A, Call, Msg, R, Res, U, build, calls, results

import middleware
from middleware.plugin.host import STEPS, PluginHost
from middleware.plugin.places import Place
from middleware.report import Action, ActionKind, Step

PACKAGE = REPO / "middleware"
#: The module that declares the vocabulary.
DECLARING = PACKAGE / "report.py"
#: Calls whose first argument is an action's kind.
RECORDERS = frozenset({"record", "_record", "Action"})
#: Calls whose string argument is a policy section or key (``@section("budget")``), not a
#: step's name although the two are spelled alike.
POLICY_KEYS = frozenset({"section"})

WRITTEN = "".join(f"def function_{i}():\n    return {i}\n" for i in range(200))
LOG = "".join(f"line {i}: collected item {i} and ran it\n" for i in range(400))
#: Compaction on every turn, whatever its cost to the prompt cache.
EVERY_TURN: dict[str, Any] = {
    "microcompact": {"schedule": {"rewrite_cost": 0, "expected_turns_min": 0}}
}


# -- the steps record declared kinds, and every declared kind is recorded ----------------


def pipeline(overrides: dict[str, Any], *plugins: object) -> middleware.Pipeline:
    """The built-in steps and ``plugins``, no entry points: every action is a step's."""
    host = PluginHost.create(load_entrypoints=False)
    for i, plugin in enumerate(plugins):
        host.register(plugin, name=f"plugin-{i}")
    policy = middleware.load_policy(env={}, dotenv_path=False, overrides=overrides)
    return middleware.Pipeline(policy, host=host, session_id="vocabulary")


def session(
    turns: int, output: str, *, tool: str = "Bash", first: tuple[str, dict[str, Any]] | None = None
) -> Any:
    """An Anthropic session of ``turns`` calls of ``tool`` answered by ``output`` (the
    first call is ``first``'s tool and input, when given)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(turns):
        name, args = first if first is not None and i == 0 else (tool, {"command": f"t {i}"})
        messages += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": name, "input": args}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": output}],
            },
        ]
    return messages


#: Histories the pairing step repairs, each in the three wire formats.
BROKEN: tuple[list[Msg], ...] = (
    [
        U("go"),
        A(None, calls("w:0", "w:1")),
        results(("w:0", "a"), ("w:1", "b")),
        A(None, calls("w:0", "w:1")),
        U("[batch feedback]"),
    ],
    [A(None, calls("w:0")), A("interleaved"), results(("w:0", "late"))],
    [A(None, calls("w:0")), U("SECURITY BLOCK"), results(("w:0", "a"))],
    [A(None, calls("dup", "dup")), results(("dup", "once"))],
    [A(None, calls("c1")), results(("c1", "first"), ("c1", "second"))],
    [A(None, calls("c1")), R((Res("c1", "a"), Res("", "nameless")))],
    [U("go"), A(None, calls("")), R((Res("", "the real output"),)), A("ok")],
    [U("go"), A(None, (Call("c1", name=""),)), U("next")],
)

REASONING = [
    {"role": "user", "content": "go"},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "call_id": "c1", "name": "a", "arguments": "{}"},
    {"type": "reasoning", "id": "rs_2", "summary": []},
    {"type": "function_call", "call_id": "c1", "name": "a", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "x"},
]


def pairing_runs() -> Iterator[list[Action]]:
    with pipeline({}) as pipe:
        for history in BROKEN:
            for fmt in ("anthropic", "openai", "responses"):
                yield pipe.process(build(history, fmt), format=fmt).report.actions
        yield pipe.process(REASONING, format="responses").report.actions


def budget_runs() -> Iterator[list[Action]]:
    big = session(3, "E" * 200_000)
    with pipeline({}) as pipe:
        yield pipe.process(session(3, "")).report.actions
        yield pipe.process(big).report.actions
        pipe.admit("Bash", "t9", "F" * 200_000)
        admitted = [*big, *session(1, "F" * 200_000)[1:]]
        admitted[-2]["content"][0]["id"] = admitted[-1]["content"][0]["tool_use_id"] = "t9"
        yield pipe.process(admitted).report.actions
    for on_error in ("keep", "truncate"):
        with pipeline({"spill": {"on_error": on_error}}, ProvidesFailingStore()) as pipe:
            yield pipe.process(big).report.actions


def microcompact_runs() -> Iterator[list[Action]]:
    write = ("Write", {"file_path": "/src/mod.py", "content": WRITTEN})
    with pipeline(EVERY_TURN) as pipe:
        yield pipe.process(session(12, LOG, first=write)).report.actions
    with pipeline(EVERY_TURN, ProvidesFailingStore()) as pipe:
        yield pipe.process(session(12, LOG, first=write)).report.actions
    truncating = {"microcompact": {**EVERY_TURN["microcompact"], "summarize_turns": 50}}
    with pipeline(truncating) as pipe:
        yield pipe.process(session(12, LOG[:4_500], tool="web_fetch")).report.actions


RUNS: dict[Step, Callable[[], Iterator[list[Action]]]] = {
    Step.PAIRING: pairing_runs,
    Step.BUDGET: budget_runs,
    Step.MICROCOMPACT: microcompact_runs,
}


def recorded() -> dict[tuple[str, str], int]:
    found: dict[tuple[str, str], int] = {}
    for runs in RUNS.values():
        for actions in runs():
            for action in actions:
                found[action.step, action.kind] = found.get((action.step, action.kind), 0) + 1
    return found


def test_the_steps_record_declared_kinds_and_every_declared_kind_is_recorded() -> None:
    found = recorded()
    assert {step for step, _ in found} <= set(Step)
    undeclared = sorted({kind for _, kind in found} - set(ActionKind))
    assert not undeclared, f"declare {undeclared} in middleware.report.ActionKind"
    dead = sorted(set(ActionKind) - {kind for _, kind in found})
    assert not dead, f"no history here records {dead}: add one, or drop the kind"


def test_a_recorded_action_holds_plain_text() -> None:
    """Reports, ledgers and records write the same bytes as before the enums (orjson
    refuses an enum as a dictionary key)."""
    for runs in RUNS.values():
        for actions in runs():
            for action in actions:
                assert type(action.step) is str and type(action.kind) is str


# -- no module spells the vocabulary itself ------------------------------------------------


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != DECLARING:
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def _called(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def _strings(node: ast.AST | None) -> list[str]:
    """The string literals ``node`` may evaluate to (itself, or either branch of a
    conditional expression)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        return [*_strings(node.body), *_strings(node.orelse)]
    return []


def test_no_module_records_a_kind_written_as_a_string() -> None:
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or _called(node) not in RECORDERS:
                continue
            kind = (
                node.args[0]
                if node.args
                else next((k.value for k in node.keywords if k.arg == "kind"), None)
            )
            for text in _strings(kind):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {text!r}")
    assert not found, f"record an ActionKind member, not a string: {found}"


def test_no_module_spells_a_kind_or_a_step_name() -> None:
    kinds = {str(kind) for kind in ActionKind}
    steps = {str(step) for step in Step}
    policy_keys: set[int] = set()
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called(node) in POLICY_KEYS:
                policy_keys.update(id(arg) for arg in node.args)
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                policy_keys.update(id(item) for item in ast.walk(node.value))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
                continue
            if node.value in kinds or (node.value in steps and id(node) not in policy_keys):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert not found, f"use middleware.report.ActionKind / Step: {found}"


# -- the host runs the steps the names declare ---------------------------------------------


def test_the_host_declares_the_steps_under_their_names_in_order() -> None:
    request_steps = [spec.name for spec in STEPS if spec.place is not Place.DISPATCH]
    assert request_steps == list(Step)
    assert all(isinstance(spec.name, Step) for spec in STEPS)


def test_a_report_summarises_the_steps_in_the_order_the_host_runs_them() -> None:
    report = middleware.Report(format="anthropic", format_source="given", policy="default")
    lines = report.summary_lines()[1:-1]
    assert lines == [f"{step}: nothing to do" for step in Step]


@pytest.mark.parametrize("kind", list(ActionKind))
def test_every_kind_reads_as_words(kind: ActionKind) -> None:
    from middleware.report import describe

    assert "_" not in describe(kind, 1) and "_" not in describe(kind, 2)
