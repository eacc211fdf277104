"""Each step hook's specification declares where it runs, and each hook whose third-party
implementations decide what old turns become says so: the host reads both off the
specifications, and the pipeline names no step (issue 37, item 2)."""

from __future__ import annotations

import types

import pytest
from locations import REPO

import middleware
from middleware import hookimpl
from middleware.plugin import hookspecs
from middleware.plugin.host import ADMISSION, STEPS, PluginHost
from middleware.plugin.places import Place, StepSpec, step, steps_of
from middleware.view import Conversation

HOOKS = sorted(
    name for name, value in vars(hookspecs).items() if hasattr(value, "chatcli_middleware_spec")
)
#: What a third-party implementation of these decides: the old turns of the next request.
DECIDING = {
    "enforce_budget", "microcompact", "tool_result_cap", "tool_file_access",
    "detect_content_type", "summarize_result", "compact_before_spill",
}  # fmt: skip


def test_the_step_hooks_declare_their_places() -> None:
    host = PluginHost.create(load_entrypoints=False, env={})
    declared = (
        StepSpec("repair_pairing", "pairing", Place.FIRST),
        StepSpec("enforce_budget", "budget", Place.AFTER_REPAIR),
        StepSpec("microcompact", "microcompact", Place.LAST),
    )
    assert host.steps == STEPS == declared
    assert host.admission == ADMISSION == StepSpec("admit_outputs", "budget", Place.DISPATCH)


def test_two_steps_declaring_one_place_are_refused() -> None:
    specs = types.ModuleType("specs")

    @step("one", Place.LAST)
    def first_hook() -> None: ...

    @step("two", Place.LAST)
    def second_hook() -> None: ...

    specs.first_hook, specs.second_hook = first_hook, second_hook  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="two step hooks declare one place"):
        steps_of(specs)


def implementing(hook: str) -> object:
    """A plugin implementing ``hook`` alone (taking none of its arguments)."""

    def answer() -> None:
        return None

    return type(f"Only_{hook}", (), {hook: staticmethod(hookimpl(answer, specname=hook))})()


@pytest.mark.parametrize("hook", HOOKS)
def test_the_hooks_that_decide_old_turns_are_declared_on_their_specs(hook: str) -> None:
    host = PluginHost.create(load_entrypoints=False, env={})
    assert not host.decides_old_turns()  # the built-in implementations are ours
    host.register(implementing(hook), name="third-party")
    assert host.decides_old_turns() is (hook in DECIDING)


def test_the_pipeline_names_no_step_and_no_codec() -> None:
    """It runs the steps the specifications place, and admits through their hook."""
    source = (REPO / "middleware" / "pipeline.py").read_text(encoding="utf-8")
    for name in [*HOOKS, "pairing", "budget", "microcompact", "anthropic"]:
        assert f'"{name}"' not in source, name


def test_admission_runs_the_dispatch_step_only() -> None:
    """A third-party budget step does not run at dispatch; one implementing admission
    does, after the built-in one."""
    log: list[str] = []

    class Both:
        @hookimpl
        def enforce_budget(self) -> None:
            log.append("enforce_budget")

        @hookimpl
        def admit_outputs(self, conversation: Conversation) -> None:
            log.append(f"admit_outputs: {conversation.nodes[1].results[0].text[:20]}")

    host = PluginHost.create(load_entrypoints=False, env={})
    host.register(Both(), name="both", builtin=True)
    policy = middleware.load_policy(None, env={}, dotenv_path=False)
    with middleware.Pipeline(policy, host=host) as pipe:
        admitted = pipe.admit("Bash", "t1", "x" * 200_000)
    assert log == [f"admit_outputs: {admitted.text[:20]}"]
    assert [a.kind for a in admitted.actions] == ["spilled"]
