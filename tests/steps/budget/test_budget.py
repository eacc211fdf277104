"""Budget enforcement: which cap applies, per-turn budgets, lossless spill, stability."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml
from failing_store import ProvidesFailingStore
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from locations import REPO
from session_builders import pipeline_for

import middleware
from middleware import ToolCap, hookimpl

#: The sizes these tests are written for (20,000-character cap, 30 mentions...).
PREVIOUS_DEFAULT = REPO / "policies" / "baselines" / "previous-default.yaml"


def policy_file(tmp_path: Path, **sections: Any) -> Path:
    """The previous default policy (the sizes these tests are written for) with
    ``sections`` merged in, microcompaction off."""
    document = middleware.load_policy(PREVIOUS_DEFAULT, env={}, dotenv_path=False).to_dict()
    document["microcompact"]["enabled"] = False  # these tests look at the budget step alone
    for name, values in sections.items():
        if isinstance(values, dict) and isinstance(document.get(name), dict):
            document[name] = {**document[name], **values}
        else:
            document[name] = values
    document.setdefault("spill", {})["root"] = str(tmp_path / "spill")
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    return path


def pipeline(tmp_path: Path, *plugins: object, **sections: Any) -> middleware.Pipeline:
    return pipeline_for(policy_file(tmp_path, **sections), *plugins, session_id="test")


def turn(*results: tuple[str, str, str | list[Any]]) -> list[dict[str, Any]]:
    """An Anthropic exchange: one assistant turn calling tools, one user message answering."""
    calls = [{"type": "tool_use", "id": i, "name": name, "input": {}} for i, name, _ in results]
    answers = [{"type": "tool_result", "tool_use_id": i, "content": c} for i, _, c in results]
    return [{"role": "assistant", "content": calls}, {"role": "user", "content": answers}]


def history(*turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Go."}]
    for t in turns:
        messages.extend(t)
    return messages


def result_text(messages: list[dict[str, Any]], tool_use_id: str) -> Any:
    for message in messages:
        if isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("tool_use_id") == tool_use_id:
                    return block["content"]
    raise KeyError(tool_use_id)


def test_a_result_over_the_per_result_cap_is_spilled_losslessly(tmp_path: Path) -> None:
    big = "".join(f"log line {i:06d}\n" for i in range(3000))  # 51,000 chars
    with pipeline(tmp_path) as pipe:
        result = pipe.process(history(turn(("t1", "bash", big))))
        preview = result_text(result.messages, "t1")
        (action,) = result.report.actions
        assert (action.kind, action.detail["cap"], action.detail["cap_source"]) == (
            "spilled",
            20_000,
            "budget.max_result_chars",
        )
        assert Path(action.detail["path"]).read_text(encoding="utf-8") == big
        assert action.detail["path"] in preview
        head, _, rest = preview.partition("\n\n... [")
        tail = rest.partition("]\n\n")[2]
        assert big.startswith(head) and len(head) <= 4000 and head.endswith("\n")
        assert big.endswith(tail) and 900 < len(tail) <= 1000 and tail.startswith("log line")
        omitted = len(big) - len(head) - len(tail)
        assert f"[{omitted} chars omitted — full output saved to" in preview
        assert (action.chars_before, action.chars_after) == (len(big), len(preview))


def test_tool_caps_plugin_declarations_and_policy_overrides(tmp_path: Path) -> None:
    class Sql:
        @hookimpl
        def tool_result_cap(self, tool_name: str) -> ToolCap | None:
            return {"sql": ToolCap(), "cat_spill": ToolCap(exempt=True)}.get(tool_name)

    messages = history(
        turn(
            ("r1", "read", "r" * 70_000),  # ChatCLI's read: 80,000
            ("r2", "read", "r" * 90_000),
            ("s1", "sql", "s" * 25_000),  # opted in without a number: 30,000
            ("s2", "sql", "s" * 35_000),
            ("c1", "cat_spill", "c" * 150_000),  # exempt
            ("b1", "bash", "b" * 21_000),  # per-result: 20,000
        )
    )
    report = (
        pipeline(tmp_path, Sql(), budget={"turn_budget_chars": 10_000_000}).process(messages).report
    )
    spilled = {a.tool_call_id: a.detail["cap_source"] for a in report.actions}
    assert spilled == {
        "r2": "plugin middleware.default_plugins.chatcli_tools",
        "s2": "plugin plugin-0 (per-tool default)",
        "b1": "budget.max_result_chars",
    }

    overridden = (
        pipeline(
            tmp_path,
            Sql(),
            budget={"turn_budget_chars": 10_000_000},
            tools={"read": {"max_chars": 60_000}, "bash": {"exempt": True}},
        )
        .process(messages)
        .report
    )
    sources = {a.tool_call_id: a.detail["cap_source"] for a in overridden.actions}
    assert set(sources) == {"r1", "r2", "s2"}
    assert sources["r1"].endswith("tools.read.max_chars")


def test_declared_caps_can_be_clamped(tmp_path: Path) -> None:
    messages = history(turn(("r1", "read", "r" * 60_000)))
    (action,) = (
        pipeline(tmp_path, budget={"declared_cap_ceiling": 50_000}).process(messages).report.actions
    )
    assert action.detail["cap"] == 50_000
    assert "clamped" in action.detail["cap_source"]


def test_turn_budget_largest_first_really_fits(tmp_path: Path) -> None:
    # ChatCLI's example: 12 results of 19,000 chars. ChatCLI cuts three to ~5 KB and lands
    # at 186,339; we stop exactly when the turn fits, keeping more of the third result.
    results = [(f"t{i:02d}", "bash", f"{i:02d}" + "x" * 18_998) for i in range(12)]
    report = pipeline(tmp_path).process(history(turn(*results))).report
    assert [a.tool_call_id for a in report.actions] == ["t00", "t01", "t02"]
    assert {a.detail["reason"] for a in report.actions} == {"turn_budget"}
    assert 195_000 < report.result_chars_after <= 200_000
    standard = pipeline(tmp_path, budget={"turn_previews": "standard"}).process(
        history(turn(*results))
    )
    assert [a.tool_call_id for a in standard.report.actions] == ["t00", "t01", "t02"]
    assert 185_000 < standard.report.result_chars_after < 190_000


def test_a_turn_of_many_small_results_is_still_brought_under_budget(tmp_path: Path) -> None:
    # 50 x 5,000 = 250,000: ChatCLI never touches results under 5,200 chars.
    results = [(f"t{i:02d}", "bash", f"{i:02d}" + "y" * 4998) for i in range(50)]
    report = pipeline(tmp_path).process(history(turn(*results))).report
    assert report.result_chars_before == 250_000
    assert report.result_chars_after <= 200_000
    assert all(a.kind == "spilled" for a in report.actions)


def test_even_split_gives_each_parallel_result_its_share(tmp_path: Path) -> None:
    results = [(f"t{i}", "bash", "z" * 30_000) for i in range(3)]
    report = pipeline(
        tmp_path, budget={"turn_strategy": "even_split", "turn_budget_chars": 80_000,
                          "max_result_chars": 100_000},
    ).process(history(turn(*results))).report  # fmt: skip
    assert [a.detail["cap"] for a in report.actions] == [26_666] * 3
    single = (
        pipeline(
            tmp_path,
            budget={
                "turn_strategy": "even_split",
                "turn_budget_chars": 80_000,
                "max_result_chars": 100_000,
            },
        )
        .process(history(turn(("t0", "bash", "z" * 30_000))))
        .report
    )
    assert single.actions == []


def test_empty_results_say_the_tool_completed(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}
    messages = history(
        turn(("t1", "bash", ""), ("t2", "bash", "  \n"), ("t3", "screenshot", [image]))
    )
    result = pipeline(tmp_path).process(messages)
    assert result_text(result.messages, "t1") == "(bash completed with no output)"
    assert result_text(result.messages, "t2") == "(bash completed with no output)"
    assert result_text(result.messages, "t3") == [image]
    off = pipeline(tmp_path, budget={"empty_result_text": None}).process(messages)
    assert not off.changed


def test_an_empty_openai_output_is_an_ordinary_answer(tmp_path: Path) -> None:
    """Chat Completions and Responses take an empty output as it is: nothing is added."""
    chat = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": ""},
    ]  # fmt: skip
    responses = [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": ""},
    ]
    for fmt, messages in (("openai", chat), ("responses", responses)):
        result = pipeline(tmp_path).process(messages, format=fmt)
        assert not result.changed and result.report.actions == [], fmt


def test_images_are_kept_when_text_is_spilled(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}
    content = [{"type": "text", "text": "q" * 30_000}, image]
    result = pipeline(tmp_path).process(history(turn(("t1", "browser", content))))
    new = result_text(result.messages, "t1")
    assert new[1] == image
    assert "chars omitted" in new[0]["text"]


def test_json_results_spill_to_json_files(tmp_path: Path) -> None:
    payload = json.dumps([{"id": i, "name": f"row {i}"} for i in range(2000)])
    (action,) = pipeline(tmp_path).process(history(turn(("t1", "sql", payload)))).report.actions
    assert action.detail["path"].endswith(".json")


def test_context_aware_ceiling_depends_only_on_what_came_before(tmp_path: Path) -> None:
    aware = {
        "context_aware": {
            "enabled": True,
            "window_tokens": 8000,
            "chars_per_token": 4,
            "result_fraction": 0.9,
            "turn_fraction": 1.0,
            "floor_tokens": 500,
        }
    }
    first = history(turn(("t1", "bash", "a" * 19_000)), turn(("t2", "bash", "b" * 15_000)))
    pipe = pipeline(tmp_path, budget=aware)
    report = pipe.process(first).report
    caps = {a.tool_call_id: a.detail["cap"] for a in report.actions}
    # The window holds 32,000 chars. t1 fits its ceiling (28,800); t2's turn starts after
    # ~19,000 chars of history, so ~13,000 are left: that is its ceiling.
    assert set(caps) == {"t2"}
    assert 12_000 < caps["t2"] < 13_000
    longer = [*first, *turn(("t3", "bash", "c" * 100))]
    again = pipe.process(longer)
    assert again.messages[: len(first)] == pipe.process(first).messages  # stable prefix


def test_when_the_spill_fails_the_result_is_kept_whole_by_default(tmp_path: Path) -> None:
    messages = history(turn(("t1", "bash", "f" * 30_000)))
    result = pipeline(tmp_path, ProvidesFailingStore()).process(messages)
    assert result_text(result.messages, "t1") == "f" * 30_000
    (action,) = result.report.actions
    assert action.kind == "spill_failed" and "No space left" in action.detail["error"]


def test_truncating_on_spill_failure_keeps_the_removed_text_in_the_report(tmp_path: Path) -> None:
    text = "".join(f"{i:05d}\n" for i in range(5000))
    result = pipeline(tmp_path, ProvidesFailingStore(), spill={"on_error": "truncate"}).process(
        history(turn(("t1", "bash", text)))
    )
    cut = result_text(result.messages, "t1")
    (action,) = result.report.actions
    assert action.kind == "truncated_unsaved" and len(cut) <= 20_000
    kept = cut.split("\n... [output truncated", 1)[0]
    assert kept + action.detail["removed_text"] == text


def test_hostile_ids_cannot_escape_the_workspace(tmp_path: Path) -> None:
    messages = history(turn(("../../../etc/passwd", "bash", "p" * 30_000)))
    with pipeline(tmp_path) as pipe:
        actions = pipe.process(messages).report.actions
        (action,) = [a for a in actions if a.kind == "spilled"]
        path = Path(action.detail["path"])
        assert path.parent == tmp_path / "spill" / "chatcli-agent-test" / "tool-results"


def test_output_is_idempotent_and_the_input_untouched(tmp_path: Path) -> None:
    messages = history(
        turn(("a", "bash", "1" * 45_000), ("b", "read", "2" * 79_000), ("c", "bash", "")),
        turn(*[(f"p{i}", "bash", "3" * 19_500) for i in range(12)]),
    )
    snapshot = json.dumps(messages)
    with pipeline(tmp_path) as pipe:
        once = pipe.process(messages)
        twice = pipe.process(once.messages)
    assert json.dumps(messages) == snapshot
    assert twice.messages == once.messages and not twice.changed


def test_two_processes_give_byte_identical_output(tmp_path: Path) -> None:
    messages = history(turn(("a", "bash", "".join(f"row {i}\n" for i in range(9000)))))
    (tmp_path / "in.json").write_text(json.dumps(messages), encoding="utf-8")
    policy = policy_file(tmp_path)
    script = textwrap.dedent(f"""
        import json, sys, middleware
        messages = json.load(open({str(tmp_path / "in.json")!r}))
        pipe = middleware.Pipeline.from_policy({str(policy)!r}, session_id="shared")
        sys.stdout.write(json.dumps(pipe.process(messages).messages))
    """)
    runs = [
        subprocess.run([sys.executable, "-c", script], capture_output=True, check=True)
        for _ in range(2)
    ]
    assert runs[0].stdout == runs[1].stdout
    assert b"chars omitted" in runs[0].stdout


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.integers(0, 60_000), min_size=1, max_size=6), min_size=1, max_size=4))
def test_spilling_is_lossless_and_every_turn_fits(tmp_path: Path, sizes: list[list[int]]) -> None:
    turns = [
        turn(
            *[
                (f"t{j}_{i}", "bash", "".join(chr(97 + (k * 7 + i) % 26) for k in range(n)))
                for i, n in enumerate(row)
            ]
        )
        for j, row in enumerate(sizes)
    ]
    messages = history(*turns)
    with pipeline(tmp_path, budget={"turn_budget_chars": 50_000}) as pipe:
        result = pipe.process(messages)
        for action in result.report.actions:
            if action.kind == "spilled":
                original = result_text(messages, action.tool_call_id)
                assert Path(action.detail["path"]).read_text(encoding="utf-8") == original
        for j, row in enumerate(sizes):
            kept = sum(len(result_text(result.messages, f"t{j}_{i}")) for i in range(len(row)))
            assert kept <= 50_000 or kept < sum(row)
        assert pipe.process(result.messages).messages == result.messages


def test_a_result_of_several_text_blocks_is_spilled_with_its_block_boundaries(
    tmp_path: Path,
) -> None:
    """Issue 13, item 4: the blocks were joined with nothing between them."""
    first = "see the files under lib/erlang/" + "\nlisting" * 4_000
    history = [
        {"role": "user", "content": "explore"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Task", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "text", "text": first},
            {"type": "text", "text": "agentId: a8f3 (for resuming)"},
        ]}]},
    ]  # fmt: skip
    with middleware.Pipeline.from_policy(policy_file(tmp_path)) as pipe:
        result = pipe.process(history)
        (action,) = result.report.actions
        saved = pipe.spill.load(action.detail["path"])
    assert saved == first + "\nagentId: a8f3 (for resuming)"


def test_results_no_preview_can_shorten_are_not_saved(tmp_path: Path) -> None:
    """A turn of many short results over the turn budget: none has a shorter preview, so
    none is written to the store (20,000 of them once meant 20,000 files nothing named,
    most of 21 s); a long one beside them is spilled as before."""
    short = [(f"s{i}", "bash", f"ok {i} " * 20) for i in range(300)]
    long = ("big", "bash", "row\n" * 20_000)
    messages = history(turn(*short, long))
    result = pipeline(tmp_path, budget={"turn_budget_chars": 5_000}).process(messages)
    spilled = [a for a in result.report.actions if a.kind == "spilled"]
    assert [a.tool_call_id for a in spilled] == ["big"]
    files = list((tmp_path / "spill").rglob("tool-results/*"))
    assert [Path(a.detail["path"]) for a in spilled] == files
