"""The plugin host: fixed step order, isolation of failing plugins, capability hooks."""

from __future__ import annotations

import logging
from dataclasses import replace
from importlib import metadata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import middleware
from middleware import ToolCap, hookimpl
from middleware.plugin.context import StepContext
from middleware.plugin.host import ENTRY_POINT_GROUP, PluginHost
from middleware.replay.costs import approximate_tokens
from middleware.view import Conversation, ToolResult

HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "list the files"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py\n"},
]


def make_host(*plugins: tuple[str, object]) -> PluginHost:
    host = PluginHost.create(load_entrypoints=False, builtins=())
    for name, plugin in plugins:
        host.register(plugin, name=name)
    return host


class Recorder:
    """A plugin implementing all three steps, appending to a shared log."""

    def __init__(self, tag: str, log: list[str]) -> None:
        self.tag = tag
        self.log = log

    @hookimpl
    def repair_pairing(self) -> None:
        self.log.append(f"pairing:{self.tag}")

    @hookimpl
    def enforce_budget(self) -> None:
        self.log.append(f"budget:{self.tag}")

    @hookimpl
    def microcompact(self) -> None:
        self.log.append(f"microcompact:{self.tag}")


def only_step(step: str, log: list[str]) -> object:
    """A plugin implementing the hook of one step only."""
    hook_name = {"pairing": "repair_pairing", "budget": "enforce_budget"}.get(step, step)

    def run() -> None:
        log.append(step)

    return type(f"Only_{step}", (), {hook_name: staticmethod(hookimpl(run, specname=hook_name))})()


@settings(max_examples=25)
@given(st.permutations(["pairing", "budget", "microcompact", "pairing", "microcompact"]))
def test_steps_run_in_fixed_order_whatever_the_registration_order(order: list[str]) -> None:
    log: list[str] = []
    host = make_host(*((f"p{i}", only_step(step, log)) for i, step in enumerate(order)))
    pipe = middleware.Pipeline(middleware.load_policy(), host=host)
    pipe.process(HISTORY)
    rank = {"pairing": 0, "budget": 1, "microcompact": 2}
    assert log == sorted(log, key=rank.__getitem__)
    assert sorted(log) == sorted(order)


def test_all_hooks_of_one_plugin_fire_in_step_order() -> None:
    log: list[str] = []
    host = make_host(("b", Recorder("b", log)), ("a", Recorder("a", log)))
    middleware.Pipeline(middleware.load_policy(), host=host).process(HISTORY)
    assert [entry.split(":")[0] for entry in log] == [
        "pairing", "pairing", "budget", "budget", "microcompact", "microcompact",
    ]  # fmt: skip


class Truncate:
    """A well-behaved step plugin: cuts every tool result to its first line."""

    @hookimpl
    def enforce_budget(self, conversation: Conversation, context: StepContext) -> None:
        for site in conversation.index().results:
            first_line = site.result.text.split("\n", 1)[0]
            conversation.replace_block(site.node, site.block, site.result.with_text(first_line))
            context.record(
                "truncated",
                tool_call_id=site.result.call_id,
                tool_name=site.tool_name,
                chars_before=len(site.result.text),
                chars_after=len(first_line),
            )


class Crash:
    """Edits the conversation, records an action, then raises."""

    @hookimpl
    def microcompact(self, conversation: Conversation, context: StepContext) -> None:
        site = conversation.index().results[0]
        conversation.replace_block(site.node, site.block, site.result.with_text("garbage"))
        context.record("garbled", tool_call_id="call_1")
        raise RuntimeError("boom")


class Corrupt:
    """Leaves something that is not a node in the conversation."""

    @hookimpl
    def microcompact(self, conversation: Conversation) -> None:
        conversation.nodes.append("not a node")  # type: ignore[arg-type]


def test_a_step_plugin_edits_only_what_it_changes() -> None:
    host = make_host(("truncate", Truncate()))
    result = middleware.Pipeline(middleware.load_policy(), host=host).process(HISTORY)
    assert result.messages[:2] == HISTORY[:2]
    assert result.messages[0] is HISTORY[0] and result.messages[1] is HISTORY[1]
    assert result.messages[2] == {**HISTORY[2], "content": "a.py"}
    assert HISTORY[2]["content"] == "a.py\nb.py\n"  # input untouched
    (action,) = result.report.actions
    assert (action.step, action.kind, action.tool_name) == ("budget", "truncated", "ls")


@pytest.mark.parametrize("bad", [Crash, Corrupt])
def test_a_failing_plugin_is_rolled_back_and_reported(
    bad: type, caplog: pytest.LogCaptureFixture
) -> None:
    host = make_host(("truncate", Truncate()), ("bad", bad()))
    with caplog.at_level(logging.ERROR, logger="middleware.plugin.host"):
        result = middleware.Pipeline(middleware.load_policy(), host=host).process(HISTORY)
    # The good plugin's work survives; the bad one's edit and action are gone.
    assert result.messages[2]["content"] == "a.py"
    assert [a.kind for a in result.report.actions] == ["truncated"]
    (problem,) = result.report.problems
    assert (problem.plugin, problem.hook) == ("bad", "microcompact")
    assert "plugin 'bad', hook 'microcompact'" in caplog.text


class Caps:
    @hookimpl
    def tool_result_cap(self, tool_name: str) -> ToolCap | None:
        return {"read": ToolCap(max_chars=80_000), "cat_spill": ToolCap(exempt=True)}.get(tool_name)


class WrongCaps:
    @hookimpl
    def tool_result_cap(self, tool_name: str) -> object:
        return 12_345 if tool_name == "read" else None


class RaisingCaps:
    @hookimpl
    def tool_result_cap(self, tool_name: str) -> ToolCap | None:
        raise ValueError(f"no idea about {tool_name}")


def test_tool_caps_are_attributed_to_their_plugin() -> None:
    host = make_host(("caps", Caps()))
    problems: list[middleware.ProblemReport] = []
    declared = host.tool_result_cap("read", problems)
    assert declared is not None
    assert (declared.cap.max_chars, declared.plugin) == (80_000, "caps")
    exempt = host.tool_result_cap("cat_spill", problems)
    assert exempt is not None and exempt.cap.exempt
    assert host.tool_result_cap("unknown_tool", problems) is None
    assert problems == []


@pytest.mark.parametrize(
    ("bad", "expected"), [(WrongCaps, "returned int"), (RaisingCaps, "no idea")]
)
def test_bad_cap_answers_fall_through_to_the_next_plugin(bad: type, expected: str) -> None:
    # Registered later, so asked first: its failure must not hide the good answer.
    host = make_host(("caps", Caps()), ("bad", bad()))
    problems: list[middleware.ProblemReport] = []
    declared = host.tool_result_cap("read", problems)
    assert declared is not None and declared.plugin == "caps"
    (problem,) = problems
    assert problem.plugin == "bad" and expected in problem.message


def test_later_plugins_override_earlier_declarations() -> None:
    class Lower:
        @hookimpl
        def tool_result_cap(self, tool_name: str) -> ToolCap | None:
            return ToolCap(max_chars=10_000) if tool_name == "read" else None

    host = make_host(("caps", Caps()), ("lower", Lower()))
    declared = host.tool_result_cap("read", [])
    assert declared is not None and (declared.cap.max_chars, declared.plugin) == (10_000, "lower")


def test_content_type_and_reload_hooks_are_isolated() -> None:
    seen: list[tuple[str, str]] = []

    class Types:
        @hookimpl
        def detect_content_type(self, text: str) -> str | None:
            return "SQL" if text.startswith("SELECT") else None

        @hookimpl
        def policy_reloaded(self, old: middleware.Policy, new: middleware.Policy) -> None:
            seen.append((old.name, new.name))

    class Broken:
        @hookimpl
        def policy_reloaded(self) -> None:
            raise OSError("disk gone")

    host = make_host(("types", Types()), ("broken", Broken()))
    problems: list[middleware.ProblemReport] = []
    assert host.detect_content_type("SELECT 1", None, problems) == "SQL"
    assert host.detect_content_type("hello", None, problems) is None
    policy = middleware.load_policy()
    host.policy_reloaded(policy, replace(policy, source="new"), problems)
    assert seen == [("default", "default")]
    assert [(p.plugin, p.hook) for p in problems] == [("broken", "policy_reloaded")]


def test_tool_cap_validates_its_values() -> None:
    with pytest.raises(ValueError, match="positive integer"):
        ToolCap(max_chars=0)
    with pytest.raises(ValueError, match="exempt"):
        ToolCap(max_chars=5, exempt=True)


def test_registering_an_invalid_plugin_is_a_plugin_error() -> None:
    class Typo:
        @hookimpl
        def enforce_budget(self, conversation: Conversation, nonsense: int) -> None:
            """Asks for an argument the hook does not have."""

    host = make_host()
    with pytest.raises(middleware.PluginError, match="typo"):
        host.register(Typo(), name="typo")


# -- entry points -------------------------------------------------------------------------


class FakeDist:
    name = "chatcli-mw-fake"
    version = "1.2.3"


class FakeEntryPoint:
    group = ENTRY_POINT_GROUP

    def __init__(self, name: str, plugin: object | Exception) -> None:
        self.name = name
        self._plugin = plugin
        self.dist = FakeDist()

    def load(self) -> object:
        if isinstance(self._plugin, Exception):
            raise self._plugin
        return self._plugin


@pytest.fixture
def fake_entry_points(monkeypatch: pytest.MonkeyPatch) -> dict[str, object | Exception]:
    registry: dict[str, object | Exception] = {}

    def entry_points(group: str) -> list[FakeEntryPoint]:
        assert group == ENTRY_POINT_GROUP
        return [FakeEntryPoint(name, plugin) for name, plugin in registry.items()]

    monkeypatch.setattr("middleware.plugin.host.entry_points", entry_points)
    return registry


def test_entry_point_plugins_load_with_their_distribution(
    fake_entry_points: dict[str, object | Exception],
) -> None:
    fake_entry_points["caps"] = Caps()
    host = PluginHost.create(env={}, builtins=())
    (info,) = host.plugins()
    assert (info.name, info.distribution, info.version) == ("caps", "chatcli-mw-fake", "1.2.3")
    assert info.hooks == ("tool_result_cap",) and not info.builtin


def test_allow_and_block_lists(fake_entry_points: dict[str, object | Exception]) -> None:
    fake_entry_points["caps"] = Caps()
    fake_entry_points["types"] = Truncate()
    names = lambda env: [p.name for p in PluginHost.create(env=env, builtins=()).plugins()]  # noqa: E731
    assert names({}) == ["caps", "types"]
    assert names({"CHATCLI_LOAD_PLUGINS": "types"}) == ["types"]
    assert names({"CHATCLI_LOAD_PLUGINS": ""}) == []
    assert names({"CHATCLI_BLOCK_PLUGINS": "caps, other"}) == ["types"]


def test_a_plugin_that_fails_to_import_is_reported_not_fatal(
    fake_entry_points: dict[str, object | Exception],
) -> None:
    fake_entry_points["broken"] = ImportError("No module named 'nope'")
    fake_entry_points["caps"] = Caps()
    host = PluginHost.create(env={}, builtins=())
    assert [p.name for p in host.plugins()] == ["caps"]
    (problem,) = host.load_problems
    assert (problem.plugin, problem.hook) == ("broken", "load")
    assert "No module named 'nope'" in problem.message


def test_real_entry_point_lookup_works_without_plugins() -> None:
    # No third-party plugin is installed in the test environment: the real lookup runs.
    assert all(
        ep.group == ENTRY_POINT_GROUP for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)
    )
    host = PluginHost.create(env={"CHATCLI_LOAD_PLUGINS": ""})
    assert all(info.builtin for info in host.plugins())


def test_results_with_images_keep_them_when_a_step_rewrites_text() -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AA=="},
    }
    result = ToolResult("t1", ({"type": "text", "text": "long"}, image))
    assert result.with_text("short").content == ({"type": "text", "text": "short"}, image)


def test_a_plugin_can_count_tokens_with_a_real_tokenizer() -> None:
    class Words:
        @hookimpl
        def count_tokens(self, text: str) -> int:
            return len(text.split())

    assert make_host().token_counter(approximate_tokens) is approximate_tokens
    counter = make_host(("words", Words())).token_counter(approximate_tokens)
    assert counter("one two three") == 3

    class Broken:
        @hookimpl
        def count_tokens(self, text: str) -> object:
            return "many"

    fallback = make_host(("broken", Broken())).token_counter(approximate_tokens)
    assert fallback("x" * 40) == 10  # characters / 4


class NewStyleWrapper:
    @hookimpl(wrapper=True)
    def tool_result_cap(self, tool_name: str) -> Any:
        return (yield)


class OldStyleWrapper:
    @hookimpl(hookwrapper=True)
    def enforce_budget(self) -> Any:
        yield


class Misspelt:
    @hookimpl
    def tool_results_cap(self, tool_name: str) -> None:
        return None


@pytest.mark.parametrize(
    ("plugin", "hook"),
    [(NewStyleWrapper(), "tool_result_cap"), (OldStyleWrapper(), "enforce_budget")],
)
def test_hook_wrappers_are_refused_at_registration(plugin: object, hook: str) -> None:
    host = make_host()
    with pytest.raises(middleware.PluginError, match="hook wrappers") as caught:
        host.register(plugin, name="wrapping")
    assert (caught.value.plugin, caught.value.hook) == ("wrapping", hook)
    assert [p.name for p in host.plugins()] == []  # nothing half-registered


def test_an_unknown_hook_is_refused_with_a_suggestion() -> None:
    with pytest.raises(middleware.PluginError, match="did you mean 'tool_result_cap'"):
        make_host(("misspelt", Misspelt()))


def test_a_refused_entry_point_plugin_is_a_load_problem_not_a_crash(
    fake_entry_points: dict[str, object | Exception],
) -> None:
    fake_entry_points["wrapping"] = NewStyleWrapper()
    fake_entry_points["caps"] = Caps()
    host = PluginHost.create(env={}, builtins=())
    assert [p.name for p in host.plugins()] == ["caps"]
    (problem,) = host.load_problems
    assert (problem.plugin, problem.hook) == ("wrapping", "tool_result_cap")
    assert "hook wrappers" in problem.message


def test_trace_hooks_logs_every_implementation_call(caplog: pytest.LogCaptureFixture) -> None:
    host = PluginHost.create(env={"CHATCLI_TRACE_HOOKS": "1"}, load_entrypoints=False)
    with caplog.at_level(logging.INFO, logger="middleware.plugin.trace"):
        middleware.Pipeline(middleware.load_policy(env={}), host=host).process(HISTORY)
    traced = [r.getMessage() for r in caplog.records if r.name == "middleware.plugin.trace"]
    for plugin, hook in [
        ("middleware.steps.pairing", "repair_pairing"),
        ("middleware.steps.budget", "enforce_budget"),
        ("middleware.steps.microcompact", "microcompact"),
        ("middleware.default_plugins.chatcli_tools", "tool_result_cap"),
    ]:
        assert any(m.startswith(f"{plugin}: {hook} returned") for m in traced), (plugin, traced)
    assert all(m.endswith(" ms") for m in traced)


def test_without_trace_hooks_nothing_is_traced(caplog: pytest.LogCaptureFixture) -> None:
    host = PluginHost.create(env={}, load_entrypoints=False)
    with caplog.at_level(logging.INFO, logger="middleware.plugin.trace"):
        middleware.Pipeline(middleware.load_policy(env={}), host=host).process(HISTORY)
    assert not [r for r in caplog.records if r.name == "middleware.plugin.trace"]
