"""Hardening of the plugin host (issue #13, item 18): whatever a third-party plugin does,
``process()`` returns, the plugin is reported by name, and nothing is lost."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware import hookimpl
from middleware.plugin.context import StepContext
from middleware.plugin.host import ENTRY_POINT_GROUP, PluginHost
from middleware.replay.costs import approximate_tokens
from middleware.view import Conversation, Node, Opaque, ToolCall

#: One tool call and its result, in each wire format.
HISTORIES: dict[str, list[dict[str, Any]]] = {
    "anthropic": [
        {"role": "user", "content": "list the files"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py\n"}],
        },
    ],
    "openai": [
        {"role": "user", "content": "list the files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.py\n"},
    ],
    "responses": [
        {"role": "user", "content": "list the files"},
        {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "a.py\n"},
    ],
}

Edit = Callable[[Conversation], None]


def set_result(**changes: Any) -> Edit:
    """Replace the first tool result by a copy with ``changes``."""

    def edit(conversation: Conversation) -> None:
        site = conversation.index().results[0]
        conversation.replace_block(site.node, site.block, replace(site.result, **changes))

    return edit


def set_call(**changes: Any) -> Edit:
    def edit(conversation: Conversation) -> None:
        site = conversation.index().calls[0]
        conversation.replace_block(site.node, site.block, replace(site.call, **changes))

    return edit


def insert(node: Node) -> Edit:
    def edit(conversation: Conversation) -> None:
        conversation.insert_node(len(conversation.nodes), node)

    return edit


def empty_result_node(conversation: Conversation) -> None:
    site = conversation.index().results[0]
    conversation.replace_node(site.node, conversation.nodes[site.node].with_blocks(()))


def second_call(conversation: Conversation) -> None:
    site = conversation.index().calls[0]
    node = conversation.nodes[site.node]
    conversation.replace_node(site.node, node.with_blocks([*node.blocks, site.call]))


#: Edits of wrong types or shapes that a codec cannot write (or that make it raise).
BAD_EDITS: dict[str, Edit] = {
    "content int": set_result(content=42),
    "content None": set_result(content=None),
    "content list of str": set_result(content=["a", "b"]),
    "content tuple of str": set_result(content=("a",)),
    "content part not JSON": set_result(content=({"type": "text", "text": object()},)),
    "call_id None": set_result(call_id=None),
    "is_error str": set_result(is_error="yes"),
    "original int": set_result(original=3),
    "call name None": set_call(name=None),
    "call id int": set_call(id=7),
    "arguments not JSON": set_call(arguments={"path": object()}),
    "raw not a dict": set_result(raw=["not", "a", "dict"]),
    "role unknown": insert(Node("robot", ())),  # type: ignore[arg-type]
    "blocks a list": insert(Node("user", [Opaque({"type": "text", "text": "x"})])),  # type: ignore[arg-type]
    "opaque not JSON": insert(Node("user", (Opaque({"type": "text", "text": {1, 2}}),))),
    "node raw not a dict": insert(Node("user", (), raw="hello")),
    "node not a Node": lambda conversation: conversation.nodes.__setitem__(1, "hello"),
}
#: Edits only some codecs cannot write: formats with one node per result or per call.
FORMAT_BAD_EDITS: dict[str, tuple[Edit, tuple[str, ...]]] = {
    "tool node without result": (empty_result_node, ("openai", "responses")),
    "two calls in one item": (second_call, ("responses",)),
}
CASES = [
    *((name, edit, fmt) for name, edit in BAD_EDITS.items() for fmt in sorted(HISTORIES)),
    *((name, edit, fmt) for name, (edit, fmts) in FORMAT_BAD_EDITS.items() for fmt in fmts),
]


class BadEdit:
    """A third-party budget plugin that makes one bad edit and records it."""

    def __init__(self, edit: Edit) -> None:
        self.edit = edit

    @hookimpl
    def enforce_budget(self, conversation: Conversation, context: StepContext) -> None:
        self.edit(conversation)
        context.record("bad_edit", tool_call_id="call_1")


def host_with(*plugins: tuple[str, object], builtins: bool = True) -> PluginHost:
    host = (
        PluginHost.create(load_entrypoints=False)
        if builtins
        else PluginHost.create(load_entrypoints=False, builtins=())
    )
    for name, plugin in plugins:
        host.register(plugin, name=name)
    return host


@pytest.fixture
def fake_entry_points(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """Entry points to load: name -> plugin, or the exception loading it raises."""
    registry: dict[str, object] = {}

    class EntryPoint:
        group = ENTRY_POINT_GROUP
        dist = None

        def __init__(self, name: str, plugin: object) -> None:
            self.name = name
            self.plugin = plugin

        def load(self) -> object:
            if isinstance(self.plugin, BaseException):
                raise self.plugin
            return self.plugin

    def entry_points(group: str) -> list[EntryPoint]:
        return [EntryPoint(name, plugin) for name, plugin in registry.items()]

    monkeypatch.setattr("middleware.plugin.host.entry_points", entry_points)
    return registry


def pipeline(host: PluginHost, **overrides: Any) -> middleware.Pipeline:
    """A pipeline under the default policy with ``overrides``; one session id for all the
    tests of a process, so that outputs naming spill files compare equal."""
    policy = middleware.load_policy(env={}, dotenv_path=False, overrides=overrides or None)
    return middleware.Pipeline(policy, host=host, session_id=f"hardening-{os.getpid()}")


def run(host: PluginHost, history: list[dict[str, Any]], **overrides: Any) -> Any:
    with pipeline(host, **overrides) as pipe:
        return pipe.process(history)


# -- a step's edits must be writable -------------------------------------------------------


@pytest.mark.parametrize(("name", "edit", "fmt"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_a_step_edit_a_codec_cannot_write_is_rolled_back_and_reported(
    name: str, edit: Edit, fmt: str
) -> None:
    history = HISTORIES[fmt]
    expected = run(host_with(), history).messages
    result = run(host_with(("bad", BadEdit(edit))), history)
    assert result.messages == expected
    json.dumps(result.messages)  # writable
    assert [a.kind for a in result.report.actions] == []
    assert [(p.plugin, p.hook) for p in result.report.problems] == [("bad", "enforce_budget")]


def test_a_valid_edit_of_every_field_is_kept() -> None:
    good = BadEdit(
        set_result(content=({"type": "text", "text": "a.py"},), is_error=True, original="a.py\n")
    )
    result = run(host_with(("good", good)), HISTORIES["anthropic"])
    assert result.report.problems == []
    assert result.messages[2]["content"][0]["content"] == [{"type": "text", "text": "a.py"}]
    assert result.messages[2]["content"][0]["is_error"] is True


def test_a_created_call_with_dict_arguments_is_writable_in_every_format() -> None:
    call = ToolCall("call_2", "ls", {"path": "."})
    for fmt, history in HISTORIES.items():
        node = Node("assistant", (call,))
        result = run(host_with(("good", BadEdit(insert(node)))), history)
        assert result.report.problems == [], fmt


def test_edits_one_format_can_write_are_kept() -> None:
    for edit in (empty_result_node, second_call):
        result = run(host_with(("fine", BadEdit(edit))), HISTORIES["anthropic"])
        assert result.report.problems == []


# -- exceptions that are not meant for the host ----------------------------------------------


class Cancelled(BaseException):
    """Like asyncio.CancelledError or trio.Cancelled: a BaseException, not an Exception."""


def raiser(error: BaseException) -> Callable[..., Any]:
    def hook(*args: Any, **kwargs: Any) -> Any:
        raise error

    return hook


def plugin_raising(hook: str, error: BaseException) -> object:
    """A plugin implementing ``hook`` (with no arguments) by raising ``error``."""
    return type("Raising", (), {hook: staticmethod(hookimpl(raiser(error), specname=hook))})()


BASE_EXCEPTIONS = {
    "sys.exit": SystemExit(3),
    "GeneratorExit": GeneratorExit(),
    "cancelled": Cancelled(),
}
HOOKS = ["repair_pairing", "enforce_budget", "microcompact", "tool_result_cap", "spill_store"]


@pytest.mark.parametrize("hook", HOOKS)
@pytest.mark.parametrize("error", sorted(BASE_EXCEPTIONS))
def test_sys_exit_and_other_base_exceptions_in_a_hook_do_not_exit_the_host(
    hook: str, error: str
) -> None:
    history = HISTORIES["openai"]
    expected = run(host_with(), history).messages
    result = run(host_with(("quitter", plugin_raising(hook, BASE_EXCEPTIONS[error]))), history)
    assert result.messages == expected
    assert [(p.plugin, p.hook) for p in result.report.problems] == [("quitter", hook)]
    assert type(BASE_EXCEPTIONS[error]).__name__ in result.report.problems[0].message


def test_sys_exit_in_policy_reloaded_does_not_exit_the_host() -> None:
    host = host_with(("quitter", plugin_raising("policy_reloaded", SystemExit(1))))
    policy = middleware.load_policy(env={}, dotenv_path=False)
    problems: list[middleware.ProblemReport] = []
    host.policy_reloaded(policy, replace(policy, source="new"), problems)
    assert [(p.plugin, p.hook) for p in problems] == [("quitter", "policy_reloaded")]


def test_a_keyboard_interrupt_of_a_built_in_step_still_stops_the_program() -> None:
    """A built-in step runs inline: a KeyboardInterrupt there is a real Ctrl-C."""
    host = host_with(builtins=False)
    host.register(plugin_raising("enforce_budget", KeyboardInterrupt()), builtin=True, name="ours")
    with pytest.raises(KeyboardInterrupt):
        run(host, HISTORIES["openai"])


def test_sys_exit_while_importing_an_entry_point_plugin_is_a_load_problem(
    fake_entry_points: dict[str, object],
) -> None:
    fake_entry_points["exits"] = SystemExit("plugin module called sys.exit() at import")
    host = PluginHost.create(env={}, builtins=())
    (problem,) = host.load_problems
    assert (problem.plugin, problem.hook) == ("exits", "load")
    assert "SystemExit" in problem.message


# -- a plugin's spill store ------------------------------------------------------------------

#: Two results of one turn, both over the default cap of 20,000 characters.
BIG: list[dict[str, Any]] = [
    {"role": "user", "content": "look at both"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            {"id": "call_b", "type": "function", "function": {"name": "cat", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "a\n" * 21_000},
    {"role": "tool", "tool_call_id": "call_b", "content": "b\n" * 21_000},
]


class MemoryStore:
    """Saves in memory; ``save`` answers ``answer(key)`` for the keys in ``bad``."""

    def __init__(self, bad: dict[str, Callable[[], Any]] | None = None) -> None:
        self.bad = bad or {}
        self.saved: dict[str, str] = {}
        self.loads = 0

    def save(self, key: str, content: str, *, suffix: str = ".txt") -> str:
        if key in self.bad:
            return self.bad[key]()  # type: ignore[no-any-return]
        location = f"mem://{key}{suffix}"
        self.saved[location] = content
        return location

    def load(self, location: str) -> str | None:
        self.loads += 1
        return self.saved.get(location)

    def close(self) -> None:
        self.saved.clear()


class StoreProvider:
    def __init__(self, store: object) -> None:
        self.store = store

    @hookimpl
    def spill_store(self) -> object:
        return self.store


def failing_save() -> str:
    raise RuntimeError("bucket gone")


def test_a_store_whose_save_raises_is_a_spill_failure_of_that_plugin() -> None:
    store = MemoryStore({"call_a": failing_save})
    result = run(host_with(("s3", StoreProvider(store))), BIG)
    a, b = result.messages[2:]
    assert a["content"] == BIG[2]["content"]  # kept whole: spill.on_error is keep
    assert len(b["content"]) <= 20_000 and "mem://call_b.txt" in b["content"]  # still enforced
    kinds = {(x.tool_call_id, x.kind) for x in result.report.actions}
    assert kinds == {("call_a", "spill_failed"), ("call_b", "spilled")}
    (failed,) = [x for x in result.report.actions if x.kind == "spill_failed"]
    assert "plugin 's3', hook 'spill_store'" in failed.detail["error"]
    assert "bucket gone" in failed.detail["error"]
    # Blamed on the store's plugin, not on the built-in budget step that called it.
    assert [(p.plugin, p.hook) for p in result.report.problems] == [("s3", "spill_store")]
    assert "save" in result.report.problems[0].message


def test_a_failed_save_follows_spill_on_error_truncate_and_loses_nothing() -> None:
    store = MemoryStore({"call_a": failing_save})
    result = run(host_with(("s3", StoreProvider(store))), BIG, **{"spill.on_error": "truncate"})
    a = result.messages[2]["content"]
    (cut,) = [x for x in result.report.actions if x.kind == "truncated_unsaved"]
    assert len(a) < len(BIG[2]["content"])
    kept = a[: a.index("\n... [output truncated")]
    assert kept + cut.detail["removed_text"] == BIG[2]["content"]


@pytest.mark.parametrize("answer", [None, "", 42, b"mem://x"], ids=repr)
def test_a_save_that_returns_no_location_is_a_spill_failure(answer: object) -> None:
    store = MemoryStore({"call_a": lambda: answer})
    result = run(host_with(("s3", StoreProvider(store))), BIG)
    a, b = result.messages[2:]
    assert a["content"] == BIG[2]["content"]
    assert "None" not in b["content"] and "mem://call_b.txt" in b["content"]
    (problem,) = result.report.problems
    assert (problem.plugin, problem.hook) == ("s3", "spill_store")
    assert "expected a non-empty string" in problem.message


def test_a_store_whose_load_or_close_raises_is_reported_not_fatal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(MemoryStore):
        def load(self, location: str) -> str | None:
            raise RuntimeError("cannot read back")

        def close(self) -> None:
            raise SystemExit("closing exits?")

    host = host_with(("s3", StoreProvider(Broken())))
    policy = middleware.load_policy(env={}, dotenv_path=False)
    problems: list[middleware.ProblemReport] = []
    guarded = host.spill_store(policy, "session", problems)
    assert guarded is not None
    with caplog.at_level(logging.ERROR, logger="middleware"):
        assert guarded.load("mem://call_a.txt") is None
        guarded.close()
        middleware.Pipeline(policy, host=host).close()
    assert "plugin 's3', hook 'spill_store'" in caplog.text
    assert "cannot read back" in caplog.text and "closing exits?" in caplog.text


def test_a_load_failure_during_compaction_is_the_store_plugins_problem() -> None:
    class Unreadable(MemoryStore):
        def load(self, location: str) -> str | None:
            self.loads += 1
            raise RuntimeError("cannot read back")

    store = Unreadable()
    host = host_with(("s3", StoreProvider(store)))
    with middleware.Pipeline(middleware.load_policy(env={}, dotenv_path=False), host=host) as pipe:
        history = pipe.process(BIG).messages
        for i in range(4):  # four turns later, the spilled results are old
            call = {"id": f"c{i}", "type": "function", "function": {"name": "ls", "arguments": ""}}
            history += [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": "ok"},
            ]
        result = pipe.process(history)
    assert store.loads > 0
    assert {a.kind for a in result.report.actions} == {"summarized"}  # compaction still ran
    assert [(p.plugin, p.hook) for p in result.report.problems] == [("s3", "spill_store")]


# -- problems outside process(): reloads, setup, token counting ------------------------------


def eventually(condition: Callable[[], bool]) -> bool:
    """Poll ``condition`` for up to 30 s (the watcher thread may be the one swapping)."""
    deadline = time.monotonic() + 30
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def reload_to(pipe: middleware.Pipeline, policy: Path, cap: int) -> None:
    """Edit the watched policy and wait for the swap (by the watcher or by reload_policy(),
    whichever sees the edit first)."""
    policy.write_text(f"version: 1\nbudget:\n  max_result_chars: {cap}\n", "utf-8")
    pipe.reload_policy()
    assert eventually(lambda: pipe.policy.get("budget.max_result_chars") == cap)


def test_a_failing_policy_reloaded_is_reported_in_the_reload_status_not_in_every_report(
    tmp_path: Path, fake_entry_points: dict[str, object]
) -> None:
    fake_entry_points["broken-import"] = ImportError("No module named 'nope'")
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\nbudget:\n  max_result_chars: 20000\n", encoding="utf-8")
    host = PluginHost.create(env={})
    host.register(plugin_raising("policy_reloaded", OSError("disk gone")), name="listener")
    with middleware.Pipeline.from_policy(policy, host=host, watch=True) as pipe:
        for cap in (9000, 9001, 9002):
            reload_to(pipe, policy, cap)
            assert eventually(lambda: bool(pipe.policy_status.plugin_problems))
        result = pipe.process(HISTORIES["openai"])
        # The setup problem (a plugin that failed to load) is repeated, once; the reload
        # hook's failures are not.
        assert [(p.plugin, p.hook) for p in result.report.problems] == [("broken-import", "load")]
        status = pipe.policy_status
        assert status.last_reload_ok and status.generation == 4
        assert [(p.plugin, p.hook) for p in status.plugin_problems] == [
            ("listener", "policy_reloaded")
        ]
        host.unregister("listener")
        reload_to(pipe, policy, 8000)
        assert eventually(lambda: pipe.policy_status.plugin_problems == ())  # it went well


def test_a_failing_count_tokens_is_reported_once_per_plugin(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class WrongType:
        @hookimpl
        def count_tokens(self, text: str) -> object:
            return "many"

    host = host_with(
        ("raises", plugin_raising("count_tokens", RuntimeError("no tokenizer"))),
        ("wrong", WrongType()),
        builtins=False,
    )
    with caplog.at_level(logging.ERROR, logger="middleware"):
        count = host.token_counter(approximate_tokens)
        assert [count("x" * 40) for _ in range(5)] == [10] * 5  # the fallback counts
    reported = [r.getMessage() for r in caplog.records if "count_tokens" in r.getMessage()]
    assert len(reported) == 2
    assert any("plugin 'raises'" in m for m in reported)
    assert any("plugin 'wrong'" in m for m in reported)


# -- the time limit ---------------------------------------------------------------------------

#: A short limit, so that the tests of hooks that never finish are quick. The tests never
#: measure time: a hook that blocks until the test releases it is always over any limit.
SHORT = {"plugins.time_limit_seconds": 0.05}
#: How long a test waits for something that must happen (a regression fails, never hangs).
PATIENCE = 30.0


class Blocking:
    """A third-party step implementation that edits, records, then blocks until released,
    and edits and records again after that (on the copies it was given)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()

    @hookimpl
    def enforce_budget(self, conversation: Conversation, context: StepContext) -> None:
        try:
            set_result(content="edited before blocking")(conversation)
            context.record("early", tool_call_id="call_1")
            self.started.set()
            self.release.wait()
            set_result(content="edited after the limit")(conversation)
            context.record("late", tool_call_id="call_1")
        finally:
            self.finished.set()


def process_in_thread(pipe: middleware.Pipeline, history: list[dict[str, Any]]) -> Any:
    """``pipe.process(history)`` on another thread, joined with a generous timeout: a
    regression (process() waiting for a hook that never ends) fails instead of hanging."""
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(pipe.process(history)), daemon=True)
    thread.start()
    thread.join(PATIENCE)
    assert not thread.is_alive(), "process() waited for a hook that never finishes"
    (result,) = results
    return result


def test_a_step_implementation_over_the_time_limit_is_discarded_and_reported() -> None:
    slow = Blocking()
    history = HISTORIES["openai"]
    expected = run(host_with(), history)
    try:
        with pipeline(host_with(("slow", slow)), **SHORT) as pipe:
            result = process_in_thread(pipe, history)
            assert slow.started.is_set()
            assert result.messages == expected.messages  # the edit made in time is discarded
            assert result.report.actions == expected.report.actions
            (problem,) = result.report.problems
            assert (problem.plugin, problem.hook) == ("slow", "enforce_budget")
            assert "time limit of 0.05 s" in problem.message
            assert "plugins.time_limit_seconds" in problem.message
            assert "edits are discarded" in problem.message
            # Still running: the next request skips it instead of waiting again.
            again = process_in_thread(pipe, history)
            assert again.messages == expected.messages
            (skipped,) = again.report.problems
            assert "skipped" in skipped.message and "still running" in skipped.message
    finally:
        slow.release.set()
    assert slow.finished.wait(PATIENCE)
    # What it did late touched nothing the request returned.
    assert result.messages == expected.messages
    assert [a.kind for a in result.report.actions] == [a.kind for a in expected.report.actions]
    assert HISTORIES["openai"][2]["content"] == "a.py\n"


def test_an_implementation_that_finished_late_runs_again() -> None:
    slow = Blocking()
    with pipeline(host_with(("slow", slow)), **SHORT) as pipe:
        slow.release.clear()
        process_in_thread(pipe, HISTORIES["openai"])
        slow.release.set()
        assert slow.finished.wait(PATIENCE)
        slow.finished.clear()
        # Finished now: asked again, and its (immediate) edit is adopted this time.
        result = process_in_thread(pipe, HISTORIES["openai"])
    assert result.messages[2]["content"] == "edited after the limit"
    assert [a.kind for a in result.report.actions] == ["early", "late"]
    assert result.report.problems == []


def test_with_no_time_limit_the_request_waits_for_the_implementation() -> None:
    slow = Blocking()
    with pipeline(host_with(("slow", slow)), **{"plugins.time_limit_seconds": None}) as pipe:
        results: list[Any] = []
        thread = threading.Thread(target=lambda: results.append(pipe.process(HISTORIES["openai"])))
        thread.start()
        try:
            assert slow.started.wait(PATIENCE)
            assert thread.is_alive() and not results  # waiting: there is no limit
        finally:
            slow.release.set()
            thread.join(PATIENCE)
    (result,) = results
    assert result.messages[2]["content"] == "edited after the limit"
    assert result.report.problems == []


class BlockingCap:
    def __init__(self) -> None:
        self.release = threading.Event()

    @hookimpl
    def tool_result_cap(self, tool_name: str) -> middleware.ToolCap:
        self.release.wait()
        return middleware.ToolCap(max_chars=1_000)  # never seen: it comes too late


def test_a_capability_over_the_time_limit_counts_as_no_answer() -> None:
    slow = BlockingCap()
    expected = run(host_with(), BIG)
    try:
        with pipeline(host_with(("slow-caps", slow)), **SHORT) as pipe:
            result = process_in_thread(pipe, BIG)
    finally:
        slow.release.set()
    assert result.messages == expected.messages  # the policy's caps, as with no plugin
    assert {(p.plugin, p.hook) for p in result.report.problems} == {
        ("slow-caps", "tool_result_cap")
    }
    assert any("counted as no answer" in p.message for p in result.report.problems)


def test_a_spill_store_over_the_time_limit_is_a_spill_failure() -> None:
    release = threading.Event()

    def hang() -> str:
        release.wait()
        return "mem://too-late"

    store = MemoryStore({"call_a": hang})
    try:
        with pipeline(host_with(("s3", StoreProvider(store))), **SHORT) as pipe:
            result = process_in_thread(pipe, BIG)
    finally:
        release.set()
    # Both kept whole (spill.on_error: keep): call_a's save did not answer in time, and
    # call_b's was skipped while that one still runs, instead of waiting again.
    assert result.messages[2:] == BIG[2:]
    assert [a.kind for a in result.report.actions] == ["spill_failed", "spill_failed"]
    late, skipped = result.report.problems
    assert {(late.plugin, late.hook), (skipped.plugin, skipped.hook)} == {("s3", "spill_store")}
    assert "did not answer within the time limit of 0.05 s" in late.message
    assert "skipped" in skipped.message


def test_keyboard_interrupt_raised_by_plugin_code_is_its_failure() -> None:
    """Third-party code runs on a worker thread, where no real Ctrl-C ever lands."""
    quitter = plugin_raising("enforce_budget", KeyboardInterrupt())
    result = run(host_with(("quitter", quitter)), HISTORIES["openai"])
    assert [(p.plugin, p.hook) for p in result.report.problems] == [("quitter", "enforce_budget")]


def test_a_real_ctrl_c_while_a_plugin_runs_still_stops_the_program() -> None:
    """A real SIGINT, as the terminal sends it to the process, lands in the main thread
    waiting for the plugin's thread, and stops the program there. (``interrupt_main()``
    only sets a flag the main thread reads at its next bytecode, which may be in a
    finalizer run by the garbage collector, where Python ignores what is raised: it
    failed so once in a full run.)"""

    class CtrlC:
        @hookimpl
        def enforce_budget(self) -> None:
            os.kill(os.getpid(), signal.SIGINT)  # the user presses Ctrl-C now

    with pytest.raises(KeyboardInterrupt), pipeline(host_with(("busy", CtrlC()))) as pipe:
        pipe.process(HISTORIES["openai"])


def test_no_thread_is_used_without_third_party_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_thread(*args: Any) -> None:
        raise AssertionError("a built-in implementation was run on a worker thread")

    monkeypatch.setattr("middleware.plugin.runner.TimeLimits.run", no_thread)
    result = run(host_with(), BIG)
    assert result.report.problems == []
    assert {a.kind for a in result.report.actions} == {"spilled"}


def test_the_time_limit_is_a_policy_key_with_an_environment_variable() -> None:
    default = middleware.load_policy(env={}, dotenv_path=False)
    assert default.get("plugins.time_limit_seconds") == 1.0
    env = {"CHATCLI_PLUGINS__TIME_LIMIT_SECONDS": "2.5"}
    assert (
        middleware.load_policy(env=env, dotenv_path=False).get("plugins.time_limit_seconds") == 2.5
    )
    with pytest.raises(middleware.PolicyError):
        middleware.load_policy(
            env={}, dotenv_path=False, overrides={"plugins.time_limit_seconds": 0}
        )


class SlowTokenizer:
    """Loads its tables on the first call (blocks until released), then counts words."""

    def __init__(self) -> None:
        self.loading = threading.Event()
        self.loaded = threading.Event()

    @hookimpl
    def count_tokens(self, text: str) -> int:
        self.loading.set()
        self.loaded.wait()
        return len(text.split())


def test_token_counting_has_no_time_limit_unless_a_policy_gives_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Counting is offline work (simulate): a tokenizer that takes long to load is waited
    for, unless the caller passes a policy."""
    slow = SlowTokenizer()
    count = host_with(("words", slow), builtins=False).token_counter(approximate_tokens)
    answers: list[int] = []
    thread = threading.Thread(target=lambda: answers.append(count("one two three")))
    thread.start()
    try:
        assert slow.loading.wait(PATIENCE)
        assert thread.is_alive() and not answers  # waiting for the tokenizer
    finally:
        slow.loaded.set()
        thread.join(PATIENCE)
    assert answers == [3]

    slow = SlowTokenizer()
    policy = middleware.load_policy(env={}, dotenv_path=False, overrides=SHORT)
    host = host_with(("words", slow), builtins=False)
    limited = host.token_counter(approximate_tokens, policy=policy)
    try:
        with caplog.at_level(logging.ERROR, logger="middleware"):
            assert [limited("x" * 40) for _ in range(3)] == [10, 10, 10]  # characters / 4
    finally:
        slow.loaded.set()
    (problem,) = limited.problems  # type: ignore[attr-defined]
    assert "time limit of 0.05 s" in problem.message
    assert sum("count_tokens" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("error", [SystemExit(2), KeyboardInterrupt(), Cancelled()], ids=repr)
def test_a_store_raising_a_base_exception_is_a_spill_failure(error: BaseException) -> None:
    def fail() -> str:
        raise error

    result = run(host_with(("s3", StoreProvider(MemoryStore({"call_a": fail})))), BIG)
    assert result.messages[2] == BIG[2]
    assert "mem://call_b.txt" in result.messages[3]["content"]
    (problem,) = result.report.problems
    assert (problem.plugin, problem.hook) == ("s3", "spill_store")
    assert type(error).__name__ in problem.message


def test_when_no_thread_can_start_the_plugin_is_skipped_not_the_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(task: object) -> None:
        raise RuntimeError("can't start new thread")

    result = run(host_with(("upper", BadEdit(set_result(content="A.PY")))), HISTORIES["openai"])
    assert result.messages[2]["content"] == "A.PY"
    monkeypatch.setattr("middleware.plugin.runner._POOL.submit", refuse)
    result = run(host_with(("upper", BadEdit(set_result(content="A.PY")))), HISTORIES["openai"])
    assert result.messages == run(host_with(), HISTORIES["openai"]).messages
    (problem,) = result.report.problems
    assert "no thread could run it" in problem.message
