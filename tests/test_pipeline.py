"""The public API: Pipeline.from_policy, process, ProcessResult and the report."""

from __future__ import annotations

import copy
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware import hookimpl
from middleware.plugin.context import StepContext
from middleware.plugin.host import PluginHost
from middleware.view import Conversation

ANTHROPIC: list[dict[str, Any]] = [
    {"role": "user", "content": "What is in config.yaml?"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Read it.", "signature": "sig=="},
            {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "read",
                "input": {"path": "config.yaml"},
            },
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01",
                "content": "port: 8080\nhost: 0.0.0.0\n",
                "cache_control": {"type": "ephemeral"},
            }
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "It sets port 8080."}]},
]


class Upper:
    """Upper-cases every tool result (a deterministic, visible edit)."""

    @hookimpl
    def microcompact(self, conversation: Conversation, context: StepContext) -> None:
        for site in conversation.index().results:
            text = site.result.text
            conversation.replace_block(site.node, site.block, site.result.with_text(text.upper()))
            context.record(
                "upper",
                tool_call_id=site.result.call_id,
                tool_name=site.tool_name,
                message_index=conversation.nodes[site.node].origin,
                chars_before=len(text),
                chars_after=len(text),
            )


def pipeline_with(*plugins: object) -> middleware.Pipeline:
    host = PluginHost.create(load_entrypoints=False)
    for i, plugin in enumerate(plugins):
        host.register(plugin, name=f"test-plugin-{i}")
    return middleware.Pipeline.from_policy(None, host=host)


def test_default_pipeline_leaves_a_valid_history_as_it_is() -> None:
    before = copy.deepcopy(ANTHROPIC)
    with middleware.Pipeline.from_policy(None) as pipe:
        result = pipe.process(ANTHROPIC)
    assert result.messages == ANTHROPIC
    assert result.messages is not ANTHROPIC  # a new list ...
    assert all(a is b for a, b in zip(result.messages, ANTHROPIC, strict=True))  # same messages
    assert not result.changed and result.format == "anthropic"
    assert before == ANTHROPIC


def test_the_report_says_what_a_step_did_and_is_json() -> None:
    result = pipeline_with(Upper()).process(ANTHROPIC)
    block = result.messages[2]["content"][0]
    assert block == {**ANTHROPIC[2]["content"][0], "content": "PORT: 8080\nHOST: 0.0.0.0\n"}
    assert result.messages[3] is ANTHROPIC[3]
    report = json.loads(result.report.to_json())
    assert report["format"] == "anthropic"
    assert report["format_source"].startswith("message 1:")
    (action,) = report["actions"]
    assert action == {
        "step": "microcompact", "kind": "upper", "tool_call_id": "toolu_01",
        "tool_name": "read", "message_index": 2, "chars_before": 25, "chars_after": 25,
        "detail": {},
    }  # fmt: skip
    assert any(line.startswith("microcompact: 1 upper") for line in result.report.summary_lines())


def test_format_can_be_given() -> None:
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    for fmt in ("anthropic", "openai", "responses"):
        result = middleware.Pipeline.from_policy(None).process(plain, format=fmt)
        assert result.format == fmt and result.report.format_source == "given"
        assert result.messages == plain
    detected = middleware.Pipeline.from_policy(None).process(plain)
    assert detected.report.format_source == "ambiguous"
    with pytest.raises(middleware.FormatError, match="unknown format 'cohere'"):
        middleware.Pipeline.from_policy(None).process(plain, format="cohere")


def test_bad_history_is_a_history_error_naming_the_message() -> None:
    with pytest.raises(middleware.HistoryError, match=r"^message 1: message has no 'role'$"):
        middleware.Pipeline.from_policy(None).process([{"role": "user", "content": "x"}, {}])


def test_process_is_deterministic_and_thread_safe() -> None:
    pipe = pipeline_with(Upper())
    histories = [
        [
            *ANTHROPIC[:2],
            {
                **ANTHROPIC[2],
                "content": [{**ANTHROPIC[2]["content"][0], "content": f"line {i}\n" * (i + 1)}],
            },
        ]
        for i in range(40)
    ]
    expected = [json.dumps(pipe.process(h).messages) for h in histories]
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(lambda h: json.dumps(pipe.process(h).messages), histories * 3))
    assert got == expected * 3


def test_closed_pipeline_refuses_work() -> None:
    pipe = middleware.Pipeline.from_policy(None)
    with pipe:
        pass
    with pytest.raises(RuntimeError, match="closed"):
        pipe.process(ANTHROPIC)


def test_from_policy_accepts_a_loaded_policy() -> None:
    policy = middleware.load_policy()
    pipe = middleware.Pipeline.from_policy(policy, session_id="s1")
    assert pipe.policy is policy and pipe.session_id == "s1"
    assert policy.name == "default" and len(policy.digest) == 64


def test_text_protocol_outputs_are_visible_to_steps(tmp_path: Any) -> None:
    policy_file = tmp_path / "text.yaml"
    policy_file.write_text(
        "version: 1\nname: text\ntext_protocol:\n  enabled: true\n"
        "  pattern: '^<returncode>'\n  tool_name: bash\n",
        encoding="utf-8",
    )
    history = [
        {"role": "system", "content": "You run bash."},
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": "THOUGHT: look.\n```bash\nls\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>a.py\n</output>"},
    ]
    host = PluginHost.create(load_entrypoints=False)
    host.register(Upper(), name="upper")
    result = middleware.Pipeline.from_policy(policy_file, host=host).process(history)
    assert result.messages[:3] == history[:3]
    assert result.messages[3] == {
        "role": "user",
        "content": "<RETURNCODE>0</RETURNCODE>\n<OUTPUT>A.PY\n</OUTPUT>",
    }
    (action,) = result.report.actions
    assert action.tool_name == "bash" and action.tool_call_id == ""


def test_closing_the_pipeline_releases_its_spill_workspace(tmp_path: Any) -> None:
    pipe = middleware.Pipeline.from_policy(None, session_id="close-me")
    location = pipe.spill.save("call_1", "full output")
    assert middleware.Pipeline.from_policy(None).session_id != pipe.session_id
    with pipe:
        assert Path(location).read_text(encoding="utf-8") == "full output"
    assert not Path(location).exists()


def test_a_plugin_can_provide_the_spill_store() -> None:
    saved: dict[str, str] = {}

    class MemoryStore:
        def save(self, key: str, content: str, *, suffix: str = ".txt") -> str:
            saved[key] = content
            return f"mem://{key}{suffix}"

        def load(self, location: str) -> str | None:
            return saved.get(location.removeprefix("mem://").removesuffix(".txt"))

        def close(self) -> None:
            saved.clear()

    class Provider:
        @hookimpl
        def spill_store(self, session_id: str) -> MemoryStore:
            return MemoryStore()

    with pipeline_with(Provider()) as pipe:
        assert pipe.spill.save("k", "v") == "mem://k.txt"
        assert saved == {"k": "v"}
    assert saved == {}


def test_close_waits_for_calls_in_flight_and_leaves_no_workspace(tmp_path: Path) -> None:
    """Issue 13, item 21: close() while other threads are in process()."""
    policy = middleware.load_policy(
        env={}, dotenv_path=False, overrides={"spill.root": str(tmp_path)}
    )
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "x" * 60_000},
    ]  # fmt: skip
    for trial in range(10):
        pipe = middleware.Pipeline(policy, session_id=f"trial-{trial}")
        outcomes: list[str] = []

        def work(pipe: middleware.Pipeline = pipe, outcomes: list[str] = outcomes) -> None:
            for _ in range(5):
                try:
                    result = pipe.process(history)
                except RuntimeError:
                    outcomes.append("refused")
                    return
                assert [a.kind for a in result.report.actions] == ["spilled"]
                outcomes.append("spilled")

        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        pipe.close()
        for thread in threads:
            thread.join(timeout=60)
        assert not any(thread.is_alive() for thread in threads)
        assert not list(tmp_path.iterdir()), f"trial {trial}: {outcomes}"


def test_admit_batch_takes_mappings_and_explains_other_types() -> None:
    """Issue 13, item 21: admit_batch([dict]) raised AttributeError."""
    with middleware.Pipeline(middleware.load_policy(env={}, dotenv_path=False)) as pipe:
        (admitted,) = pipe.admit_batch(
            [{"tool_name": "bash", "tool_use_id": "c1", "output": "x" * 30_000}]
        )
        assert admitted.changed
        with pytest.raises(TypeError, match="ToolOutput or a mapping"):
            pipe.admit_batch(["bash output"])  # type: ignore[list-item]
        with pytest.raises(ValueError, match="missing 'output'"):
            pipe.admit_batch([{"tool_name": "bash", "tool_use_id": "c2"}])


@pytest.mark.parametrize(
    ("kind", "count", "phrase"),
    [
        ("synthetic_result", 1, "1 synthetic result"),
        ("synthetic_result", 2, "2 synthetic results"),
        ("orphan_dropped", 3, "3 orphans dropped"),
        ("duplicate_result_dropped", 2, "2 duplicate results dropped"),
        ("empty_replaced", 2, "2 empty results replaced"),
        ("id_renamed", 2, "2 ids renamed"),
        ("spilled", 2, "2 spilled"),
        ("summarized", 1, "1 summarized"),
        ("my_plugin_thing", 2, "2 my plugin things"),
    ],
)
def test_the_summary_counts_in_plain_words(kind: str, count: int, phrase: str) -> None:
    """Issue 13, item 20: the summary said "2 synthetic result"."""
    report = middleware.Report(format="openai", format_source="given", policy="p")
    report.actions.extend(middleware.Action("pairing", kind, f"c{i}") for i in range(count))
    assert report.summary_lines()[1] == f"pairing: {phrase}"


def test_a_continuation_keeps_outputs_of_calls_the_provider_holds() -> None:
    """A Responses request with previous_response_id sends only the new items: an output
    answers a call of the stored response, which is not in the history."""
    items = [
        {"type": "function_call_output", "call_id": "call_9", "output": "x" * 30_000},
        {"type": "message", "role": "user", "content": "and now?"},
    ]
    with middleware.Pipeline.from_policy(None) as pipe:
        kept = pipe.process(items, format="responses", continuation=True)
        alone = pipe.process(items, format="responses")
    assert [a.kind for a in kept.report.actions] == ["spilled"]  # the budget still runs
    assert kept.messages[0]["call_id"] == "call_9"
    assert "orphan_dropped" in [a.kind for a in alone.report.actions]
