"""Every hook is documented in docs/plugins.md with its arguments and an example, and every
example runs here, as a third-party plugin would (``test_hook_<name>``, one per hook)."""

from __future__ import annotations

import inspect
import json
import logging
import re
import types
from pathlib import Path
from typing import Any

import pytest
from locations import REPO

import middleware
from middleware.plugin import hookspecs
from middleware.plugin.host import BLOCK_PLUGINS_ENV as BLOCK
from middleware.plugin.host import PluginHost
from middleware.replay.costs import approximate_tokens

DOCS = REPO / "docs" / "plugins.md"
HEADING = re.compile(r"^#### `(\w+)\(([^)]*)\)`$", re.MULTILINE)
HOOKS = sorted(
    name for name, value in vars(hookspecs).items() if hasattr(value, "chatcli_middleware_spec")
)


def documented() -> dict[str, list[str]]:
    text = DOCS.read_text(encoding="utf-8")
    return {m.group(1): [a.strip() for a in m.group(2).split(",")] for m in HEADING.finditer(text)}


def example(hook: str) -> types.ModuleType:
    """The example of ``hook`` in docs/plugins.md, run as a plugin module."""
    text = DOCS.read_text(encoding="utf-8")
    start = next(m.end() for m in HEADING.finditer(text) if m.group(1) == hook)
    end = re.compile(r"^#{2,4} ", re.MULTILINE).search(text, start)
    section = text[start : end.start() if end else len(text)]
    code = section.split("```python\n", 1)[1].split("\n```", 1)[0]
    module = types.ModuleType(f"docs_example_{hook}")
    exec(compile(code, f"{DOCS}:{hook}", "exec"), module.__dict__)
    return module


def pipeline(hook: str, **overrides: Any) -> middleware.Pipeline:
    host = PluginHost.create(load_entrypoints=False)
    host.register(example(hook), name=f"example-{hook}")
    policy = middleware.load_policy(env={}, dotenv_path=False, overrides=overrides)
    return middleware.Pipeline(policy, host=host)


def test_every_hook_is_documented_with_its_arguments() -> None:
    docs = documented()
    assert sorted(docs) == HOOKS, "docs/plugins.md documents other hooks than hookspecs.py"
    for hook in HOOKS:
        spec = list(inspect.signature(getattr(hookspecs, hook)).parameters)
        assert docs[hook] == spec, f"docs/plugins.md gives {hook} the arguments {docs[hook]}"
        assert getattr(hookspecs, hook).__doc__, f"hookspecs.{hook} has no docstring"


def test_every_hook_has_a_test() -> None:
    tests = "".join(path.read_text(encoding="utf-8") for path in (REPO / "tests").rglob("*.py"))
    missing = [hook for hook in HOOKS if f"def test_hook_{hook}(" not in tests]
    assert not missing, f"write test_hook_<name> for {missing}"


def test_hook_repair_pairing() -> None:
    history = [
        {"role": "user", "content": "deploy"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "deploy", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "notify", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "CANCELLED"}],
        },
    ]
    with pipeline("repair_pairing") as pipe:
        result = pipe.process(history)
    first, second = result.messages[2]["content"]
    assert first["is_error"] is True  # the plugin's rule
    assert second["tool_use_id"] == "t2" and second["is_error"] is True  # the built-in repair
    assert [a.kind for a in result.report.by_step("pairing")] == [
        "synthetic_result",
        "marked_error",
    ]


def test_hook_enforce_budget() -> None:
    output = "\x1b[32mok\x1b[0m 3 passed\n\x1b[1mdone\x1b[0m"
    history = [
        {"role": "user", "content": "test"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": output},
    ]  # fmt: skip
    with pipeline("enforce_budget") as pipe:
        result = pipe.process(history)
        text = result.messages[2]["content"]
        assert text.startswith("ok 3 passed\ndone\n[colour codes removed; original: ")
        (action,) = [a for a in result.report.actions if a.kind == "ansi_removed"]
        assert pipe.spill.load(action.detail["path"]) == output
        assert pipe.process(result.messages).messages == result.messages


def test_hook_microcompact() -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" * 50},
    }
    history: list[dict[str, Any]] = [{"role": "user", "content": "look"}]
    for i, tool in enumerate(["screenshot", "click", "click", "click"]):
        content = [image, {"type": "text", "text": "the login page"}] if i == 0 else "ok"
        history += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": tool, "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": content}],
            },
        ]
    with pipeline("microcompact") as pipe:
        result = pipe.process(history)
        block = result.messages[2]["content"][0]
        assert block["content"].startswith("[old screenshot removed; its content parts are saved")
        (action,) = [a for a in result.report.actions if a.kind == "screenshot_removed"]
        saved = pipe.spill.load(action.detail["path"])
        assert saved is not None and json.loads(saved)[0] == image
        assert pipe.process(result.messages).messages == result.messages


def test_hook_admit_outputs() -> None:
    output = "line one\r\nline two\r\n"
    with pipeline("admit_outputs") as pipe:
        admitted = pipe.admit("dir", "t1", output)
        assert admitted.text == "line one\nline two\n"
        (action,) = admitted.actions
        assert (action.step, action.kind) == ("budget", "line_ends_normalised")
        assert pipe.spill.load(action.detail["path"]) == output
        history = [
            {"role": "user", "content": "list"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "dir", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": output}],
            },
        ]
        result = pipe.process(history)  # the result comes back as the agent had it
    assert result.messages[2]["content"][0]["content"] == admitted.text
    assert [a.kind for a in result.report.actions] == ["decision_replayed"]


def big(tool: str, size: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": tool, "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "row,value\n" * (size // 10)},
    ]  # fmt: skip


def test_hook_tool_result_cap() -> None:
    with pipeline("tool_result_cap") as pipe:
        capped = pipe.process(big("sql_query", 80_000))
        exempt = pipe.process(big("read_spilled_file", 100_000))
    (spilled,) = capped.report.actions
    assert (spilled.detail["cap"], spilled.detail["cap_source"]) == (
        40_000,
        "plugin example-tool_result_cap",
    )
    assert not exempt.report.actions


def test_hook_tool_file_access() -> None:
    """The example's tool reads a file: its result stays whole while young, and once it
    is compacted the summary says to read the file again with the tool."""
    numbered = "".join(f"{n:>5}  row_{n} = load(source_{n})\n" for n in range(1, 200))
    history: list[dict[str, Any]] = [{"role": "user", "content": "fix it"}]
    calls = [("view_file", {"path": "src/app.rs", "start": 10}, numbered)]
    calls += [("ls", {"dir": str(i)}, f"listing {i}\n" * 300) for i in range(22)]
    for i, (tool, arguments, output) in enumerate(calls):
        history += [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function",
                 "function": {"name": tool, "arguments": json.dumps(arguments)}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": output},
        ]  # fmt: skip
    with pipeline("tool_file_access", **EVERY_TURN) as pipe:
        young = pipe.process(history[:9]).messages
        old = pipe.process(history).messages
    assert young[2]["content"] == numbered  # kept whole: the ls outputs are summarised
    assert young[4]["content"].startswith("[Old tool result cleared")
    assert "read it again with view_file (start: 10) before acting on it" in old[2]["content"]
    assert "Not all of src/app.rs is shown" in old[2]["content"]


def compacting_session(tool: str, output: str) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "user", "content": "query"}]
    for i in range(4):
        history += [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function",
                 "function": {"name": tool if i == 0 else "ls", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": output if i == 0 else "a.py"},
        ]  # fmt: skip
    return history


#: Compact on every turn, whether or not the rewrite pays for the cache it breaks.
EVERY_TURN = {
    "microcompact.schedule.rewrite_cost": 0,
    "microcompact.schedule.expected_turns_min": 0,
}


def test_hook_detect_content_type() -> None:
    csv = "id,name,team\n" + "".join(f"{i},user{i},core\n" for i in range(200))
    with pipeline("detect_content_type", **EVERY_TURN) as pipe:
        result = pipe.process(compacting_session("sql_query", csv))
        other = pipe.process(compacting_session("bash", csv))
    assert "CSV. Full output:" in result.messages[2]["content"]
    assert "CSV" not in other.messages[2]["content"]


def test_hook_summarize_result() -> None:
    host = PluginHost.create(load_entrypoints=False)
    host.register(example("detect_content_type"), name="types")
    host.register(example("summarize_result"), name="summaries")
    csv = "id,name,team\n" + "".join(f"{i},user{i},core\n" for i in range(200))
    policy = middleware.load_policy(env={}, dotenv_path=False, overrides=EVERY_TURN)
    with middleware.Pipeline(policy, host=host) as pipe:
        result = pipe.process(compacting_session("sql_query", csv))
        summary = result.messages[2]["content"]
        assert summary.startswith("[old query result: 200 rows of id,name,team; full result: ")
        path = summary.rsplit(": ", 1)[1].rstrip("]")
        assert pipe.spill.load(path) == csv


def test_hook_compact_before_spill(tmp_path: Path) -> None:
    """The example replaces the built-in compaction (blocked): when the context is tight,
    the budget step counts on its promise to clear old search results, so the new result
    goes out whole, and the example's own step keeps the promise."""
    host = PluginHost.create(
        load_entrypoints=False, env={"CHATCLI_BLOCK_PLUGINS": "middleware.steps.microcompact"}
    )
    host.register(example("compact_before_spill"), name="search-cleanup")
    overrides = {"spill.root": str(tmp_path), "budget.context_aware.window_tokens": 32_768}
    policy = middleware.load_policy("preset:hermes", env={}, dotenv_path=False, overrides=overrides)
    history: list[dict[str, Any]] = [{"role": "user", "content": "find the bug"}]
    outputs = [f"{tool} {i}\n" + "match\n" * 5_000 for i, tool in enumerate(["search"] * 4)]
    outputs.append("build log\n" * 3_000)
    for i, (tool, output) in enumerate(zip(["search"] * 4 + ["bash"], outputs, strict=True)):
        history += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": tool, "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": output}],
            },
        ]
    with middleware.Pipeline(policy, host=host) as pipe:
        result = pipe.process(history)
        cleared = [a for a in result.report.actions if a.kind == "search_cleared"]
        assert [(a.step, a.tool_call_id) for a in cleared] == [
            ("microcompact", "t0"),
            ("microcompact", "t1"),
        ]
        for action, output in zip(cleared, outputs, strict=False):
            assert pipe.spill.load(action.detail["path"]) == output
        assert result.messages[-1]["content"][0]["content"] == outputs[-1]  # room was made
        assert result.messages[6]["content"][0]["content"] == outputs[2]  # protected turns
        assert not result.report.problems
        assert pipe.process(result.messages).messages == result.messages
    with middleware.Pipeline(
        policy,
        host=PluginHost.create(
            load_entrypoints=False, env={"CHATCLI_BLOCK_PLUGINS": "middleware.steps.microcompact"}
        ),
    ) as pipe:
        alone = pipe.process(history)  # nobody promises: the budget step spills instead
    assert [a.kind for a in alone.report.actions] == ["spilled"]


def test_hook_spill_store() -> None:
    with pipeline("spill_store") as pipe:
        result = pipe.process(big("bash", 30_000))
        (action,) = result.report.actions
        assert action.detail["path"].startswith(f"memory://{pipe.session_id}/c1-")
        assert pipe.spill.load(action.detail["path"]) == big("bash", 30_000)[2]["content"]
    assert not pipe.spill.saved  # type: ignore[attr-defined]  # closed with the pipeline


def test_hook_count_tokens() -> None:
    host = PluginHost.create(load_entrypoints=False, builtins=())
    host.register(example("count_tokens"), name="tokens")
    count = host.token_counter(approximate_tokens)
    assert count("def main():") == 6  # "def", " ", "main", "(", ")", ":"
    assert count("") == 0


def test_hook_policy_reloaded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\nbudget:\n  max_result_chars: 20000\n", encoding="utf-8")
    host = PluginHost.create(load_entrypoints=False)
    host.register(example("policy_reloaded"), name="reload-log")
    with middleware.Pipeline.from_policy(policy, host=host, watch=True) as pipe:
        policy.write_text("version: 1\nbudget:\n  max_result_chars: 9000\n", encoding="utf-8")
        with caplog.at_level(logging.WARNING, logger="my_plugin"):
            pipe.reload_policy()
    assert "result cap changed from 20000 to 9000" in caplog.text


def test_hook_result_cap() -> None:
    """A plugin's answer comes before the budget step's; a tool it does not know gets the
    budget step's cap; with the budget step blocked, nothing bounds a result."""
    with pipeline("result_cap") as pipe:
        assert pipe.result_cap("sql_query", parallel_calls=2) == middleware.Cap(
            10_000, "plugin: sql_query shares 20,000 characters"
        )
        assert pipe.result_budget("ls") == 5_000  # budget.max_result_chars
    host = PluginHost.create(load_entrypoints=False, env={BLOCK: "middleware.steps.budget"})
    with middleware.Pipeline.from_policy(None, host=host) as pipe:
        blocked = pipe.result_cap("ls")
    assert blocked.max_chars is None and "budget blocked" in blocked.source


def test_hook_loop_alerts() -> None:
    """Every implementation's alerts reach the report, after the built-in loop guard's."""
    deploy = [{"role": "user", "content": "ship it"}]
    for i in range(2):
        deploy += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"d{i}", "name": "deploy", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"d{i}", "content": "ok"}],
            },
        ]
    with pipeline("loop_alerts") as pipe:
        report = pipe.process(deploy).report
    assert [(a.kind, a.tool_name, a.call_ids) for a in report.loop_alerts] == [
        ("repeated_call", "deploy", ("d0", "d1"))
    ]


def test_a_loop_guard_that_fails_is_reported_and_its_notice_rolled_back() -> None:
    class Broken:
        @middleware.hookimpl
        def loop_alerts(self, conversation: Any, policy: Any) -> list[Any]:
            conversation.nodes.pop()  # an edit, then a failure
            raise RuntimeError("the guard broke")

    host = PluginHost.create(load_entrypoints=False)
    host.register(Broken(), name="broken-guard")
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    with middleware.Pipeline.from_policy(None, host=host) as pipe:
        result = pipe.process(history)
    assert result.output == history
    assert [(p.plugin, p.hook) for p in result.report.problems] == [("broken-guard", "loop_alerts")]
