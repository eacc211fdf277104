"""Microcompaction: rules, markers, content types, exemptions and the rewrite schedule."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from locations import REPO
from session_builders import pipeline_for, tool_session

import middleware
from middleware import hookimpl
from middleware.steps.content_types import detect_content_type

PATH_RE = r"/chatcli-agent-mc/tool-results/"


#: ChatCLI's rules on every turn: the rule tests below are about ages and markers, not about
#: the default schedule (tested at the end).
CHATCLI_RULES: dict[str, Any] = {
    "summarize_turns": 4,
    "min_content": 3000,
    "mentions": 12,
    "schedule": {"rewrite_cost": 0, "expected_turns_min": 0},
}


#: The sizes these tests are written for (20,000-character cap, 30 mentions...).
PREVIOUS_DEFAULT = REPO / "policies" / "baselines" / "previous-default.yaml"


def policy_file(tmp_path: Path, *, defaults: bool = False, **microcompact: Any) -> Path:
    document = middleware.load_policy(PREVIOUS_DEFAULT, env={}, dotenv_path=False).to_dict()
    if not defaults:
        rules = {**CHATCLI_RULES, **microcompact}
        rules["schedule"] = {**CHATCLI_RULES["schedule"], **microcompact.get("schedule", {})}
        microcompact = rules
    schedule = microcompact.pop("schedule", {})
    document["microcompact"].update(microcompact)
    document["microcompact"]["schedule"].update(schedule)
    document["spill"]["root"] = str(tmp_path / "spill")
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    return path


def pipeline(tmp_path: Path, *plugins: object, **microcompact: Any) -> middleware.Pipeline:
    return pipeline_for(policy_file(tmp_path, **microcompact), *plugins, session_id="mc")


def session(*outputs: tuple[str, str]) -> list[dict[str, Any]]:
    return tool_session(*outputs)


def contents(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


LINES = "".join(f"{'a' * 99}\n" for _ in range(150))  # 15,000 chars, 150 lines


def test_truncation_from_age_two_keeps_head_tail_and_a_pointer(tmp_path: Path) -> None:
    with pipeline(tmp_path) as pipe:
        result = pipe.process(session(("bash", LINES), ("bash", "ok"), ("bash", "ok")))
        old, *recent = contents(result.messages)
        assert recent == ["ok", "ok"]  # the last two turns are untouched
        (action,) = result.report.by_step("microcompact")
        assert (action.kind, action.detail["age"]) == ("truncated", 2)
        head, _marker, tail = old.partition("\n[... ")
        assert len(head) == 2000 and LINES.startswith(head)
        tail = tail.split("]\n", 1)[1]
        assert len(tail) == 500 and LINES.endswith(tail)  # ChatCLI drops a line: 400
        assert f"[... {15_000 - 2500} chars omitted from old tool result; full output: " in old
        assert Path(action.detail["path"]).read_text(encoding="utf-8") == LINES


def test_summary_from_age_four_keeps_what_the_model_needs(tmp_path: Path) -> None:
    log = (
        "".join(f"src/app/module_{i}.py:{i}: processed item {i}\n" for i in range(120))
        + "Traceback (most recent call last):\nKeyError: session_token\n"
    )
    outputs = [("grep", log)] + [("bash", "ok")] * 4
    with pipeline(tmp_path) as pipe:
        result = pipe.process(session(*outputs))
    summary = contents(result.messages)[0]
    first_line, *rest = summary.split("\n")
    assert first_line.startswith(f"[Old tool result cleared — 122 lines, {len(log)} chars, ")
    assert "grep matches" in first_line and "Full output: " in first_line
    assert rest[0].startswith("Mentions: src/app/module_0.py")
    assert any("KeyError: session_token" in line for line in rest)


def test_a_truncated_result_is_summarised_later_on_its_original_size(tmp_path: Path) -> None:
    # In ChatCLI a truncated result (~2.5 KB) falls under the 3,000 minimum: never summarised.
    with pipeline(tmp_path) as pipe:
        early = pipe.process(session(("bash", LINES), ("bash", "ok"), ("bash", "ok")))
        later = [*early.messages, *session(("bash", "x"), ("bash", "y"))[1:]]
        for i, message in enumerate(later[7:], start=3):
            if message["role"] == "assistant":
                message["tool_calls"][0]["id"] = f"c{i}"
            else:
                message["tool_call_id"] = f"c{i}"
        result = pipe.process(later)
    assert contents(result.messages)[0].startswith("[Old tool result cleared — 150 lines, 15000")


def test_small_results_errors_and_exempt_tools_are_kept(tmp_path: Path) -> None:
    big = "z" * 3000
    outputs = [("bash", "z" * 2999), ("bash", big), ("Edit", big), ("write", big)]
    messages = session(*outputs, *[("bash", "ok")] * 4)
    messages[4] = {**messages[4], "content": big}
    with pipeline(tmp_path) as pipe:
        kept = contents(pipe.process(messages).messages)
    assert kept[0] == "z" * 2999  # under the minimum
    assert kept[1].startswith("[Old tool result cleared")  # exactly the minimum: eligible
    assert kept[2:4] == [big, big]  # exempt tools
    call = {"type": "tool_use", "id": "e", "name": "bash", "input": {}}
    anthropic = [
        {"role": "assistant", "content": [call]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "e", "is_error": True, "content": big}
            ],
        },
        *[{"role": "assistant", "content": "next"}, {"role": "user", "content": "go"}] * 4,
    ]
    with pipeline(tmp_path) as pipe:
        assert not pipe.process(anthropic).report.by_step("microcompact")


def test_text_protocol_outputs_are_compacted_like_any_other(tmp_path: Path) -> None:
    path = policy_file(tmp_path)
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    document["text_protocol"] = {
        "enabled": True,
        "pattern": "^<returncode>",
        "follows_assistant": True,
        "tool_name": "bash",
    }
    path.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    messages = [{"role": "user", "content": "Fix it."}]
    for i in range(5):
        messages.append({"role": "assistant", "content": f"THOUGHT {i}\n```bash\ncat f{i}\n```"})
        body = LINES if i == 0 else "ok"
        messages.append({"role": "user", "content": f"<returncode>0</returncode>\n{body}"})
    with middleware.Pipeline.from_policy(path, session_id="mc") as pipe:
        result = pipe.process(messages)
    assert result.messages[2]["content"].startswith("[Old tool result cleared")
    assert result.messages[-1] is messages[-1]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('{"a": 1}', "JSON"),
        ("diff --git a/x.go b/x.go\n--- a/x.go\n+++ b/x.go\n@@ -1 +1 @@\n-package main\n", "diff"),
        ("commit 1234567890abcdef\nAuthor: A\n\n    import fix\n", "git log"),
        ("import os\n\ndef main():\n    pass\n", "Python source"),
        ("package main\n\nfunc main() {}\n", "Go source"),
        ("const x = require('y');\nfunction f() {}\n", "JavaScript source"),
        ('Traceback (most recent call last):\n  File "a.py"\nValueError\n', "Python traceback"),
        ("the build finished\n", "text"),
    ],
)
def test_content_types_do_not_call_a_diff_go_source(text: str, kind: str) -> None:
    assert detect_content_type(text) == kind


def test_a_plugin_can_name_content_types(tmp_path: Path) -> None:
    class Sql:
        @hookimpl
        def detect_content_type(self, text: str) -> str | None:
            return "SQL rows" if text.startswith("id |") else None

    rows = "id | name\n" + "".join(f"{i} | row {i}\n" for i in range(400))
    with pipeline(tmp_path, Sql()) as pipe:
        result = pipe.process(session(("sql", rows), *[("bash", "ok")] * 4))
    assert ", SQL rows. Full output" in contents(result.messages)[0]


def test_stepped_schedule_keeps_the_prefix_byte_identical_between_rewrites(
    tmp_path: Path,
) -> None:
    outputs = [("bash", f"{i:03d}" + LINES[3:]) for i in range(12)]
    full = session(*outputs)
    with pipeline(tmp_path, schedule={"step_turns": 4}) as pipe:
        sent = [json.dumps(pipe.process(full[: 1 + 2 * n]).messages) for n in range(1, 13)]
    rewrites = 0
    for before, after in itertools.pairwise(sent):
        if not after.startswith(before[:-1]):  # anything but appending is a rewrite
            rewrites += 1
    assert rewrites == 3  # boundaries at 4, 8 and 12 turns
    with pipeline(tmp_path) as every_turn:
        chatcli = [json.dumps(every_turn.process(full[: 1 + 2 * n]).messages) for n in range(1, 13)]
    assert sum(not b.startswith(a[:-1]) for a, b in itertools.pairwise(chatcli)) > 2


def test_trigger_and_window(tmp_path: Path) -> None:
    messages = session(*[("bash", LINES)] * 6)
    with pipeline(tmp_path, schedule={"trigger_tokens": 1_000_000}) as pipe:
        assert not pipe.process(messages).report.by_step("microcompact")
    window = 10_000  # tokens: 40,000 chars; the raw history is ~90,000
    with pipeline(tmp_path, schedule={"step_turns": 100, "window_tokens": window}) as pipe:
        result = pipe.process(messages)
    kept = sum(len(c) for c in contents(result.messages))
    assert kept <= window * 4
    assert contents(result.messages)[-2:] == [LINES, LINES]


def test_compaction_is_idempotent(tmp_path: Path) -> None:
    messages = session(*[("bash", LINES)] * 6)
    with pipeline(tmp_path) as pipe:
        once = pipe.process(messages)
        twice = pipe.process(once.messages)
    assert twice.messages == once.messages
    assert not twice.report.by_step("microcompact")


def test_a_result_the_budget_spilled_is_compacted_from_its_original(tmp_path: Path) -> None:
    big = "".join(f"{i:05d} " + "b" * 94 + "\n" for i in range(400))  # 40,400 chars
    with pipeline(tmp_path) as pipe:
        result = pipe.process(session(("bash", big), ("bash", "ok"), ("bash", "ok")))
    spilled = result.report.by_step("budget")[0].detail["path"]
    (compacted,) = result.report.by_step("microcompact")
    assert compacted.detail["path"] == spilled  # one file holds the full text
    text = contents(result.messages)[0]
    head, _, rest = text.partition("\n[... ")
    marker, _, tail = rest.partition("]\n")
    assert big.startswith(head)
    assert big.endswith(tail)
    omitted = len(big) - len(head) - len(tail)
    assert marker == f"{omitted} chars omitted from old tool result; full output: {spilled}"


def test_a_rewrite_happens_only_when_it_pays_for_the_cache_it_breaks(tmp_path: Path) -> None:
    # One big old result followed by small turns: reclaiming it is worth re-sending what
    # follows. Followed by large outputs that stay (an exempt tool), it never is.
    cheap_suffix = session(("bash", LINES), *[("bash", "ok")] * 4)
    costly_suffix = session(("bash", LINES), *[("Edit", "e" * 10_000)] * 8)
    with pipeline(tmp_path, schedule={"min_reclaim_ratio": 1.0}) as pipe:
        assert pipe.process(cheap_suffix).report.by_step("microcompact")
        assert not pipe.process(costly_suffix).report.by_step("microcompact")
    with pipeline(tmp_path, schedule={"min_reclaim_ratio": 0.0}) as pipe:
        assert pipe.process(costly_suffix).report.by_step("microcompact")


def test_reclaim_gate_decisions_never_change_as_the_session_grows(tmp_path: Path) -> None:
    outputs = [("bash", f"{i:03d}" + LINES[3:] if i % 3 == 0 else "m" * 1500) for i in range(15)]
    full = session(*outputs)
    with pipeline(
        tmp_path, schedule={"min_reclaim_ratio": 0.5, "min_reclaim_tokens": 1000}
    ) as pipe:
        sent = [json.dumps(pipe.process(full[: 1 + 2 * n]).messages) for n in range(1, 16)]
    rewrites = [i for i, (a, b) in enumerate(itertools.pairwise(sent)) if not b.startswith(a[:-1])]
    assert 0 < len(rewrites) < 6
    # Replaying any prefix again gives the same bytes: no hidden state.
    with pipeline(
        tmp_path, schedule={"min_reclaim_ratio": 0.5, "min_reclaim_tokens": 1000}
    ) as pipe:
        assert json.dumps(pipe.process(full[:21]).messages) == sent[9]


def test_default_schedule_rewrites_only_when_the_rewrite_pays_back(tmp_path: Path) -> None:
    # Break-even: removing S saves reading S on each later request; re-sending R uncached
    # costs 11.5 reads of R (Anthropic 5-minute prices); the session is expected to go on
    # for max(its turns so far, 10) turns.
    cheap = session(("bash", LINES), *[("bash", "ok")] * 3)
    costly = session(("bash", LINES), *[("Edit", "e" * 10_000)] * 3)
    with pipeline(tmp_path, defaults=True) as pipe:
        (action,) = pipe.process(cheap).report.by_step("microcompact")
        assert action.kind == "summarized"
        assert not pipe.process(costly).report.by_step("microcompact")
    # Free rewrites (OpenAI before GPT-5.6): the same history is compacted.
    with pipeline(tmp_path, defaults=True, schedule={"rewrite_cost": 0}) as pipe:
        assert pipe.process(costly).report.by_step("microcompact")


def test_a_plugin_can_write_the_summary_and_the_pointer_is_kept(tmp_path: Path) -> None:
    class Short:
        @hookimpl
        def summarize_result(self, tool_name: str | None, content_type: str) -> str:
            return f"[{tool_name} output, {content_type}, cleared]"

    with pipeline(tmp_path, Short()) as pipe:
        result = pipe.process(session(("bash", LINES), *[("bash", "ok")] * 4))
        summary = contents(result.messages)[0]
        path = result.report.by_step("microcompact")[0].detail["path"]
        assert summary == f"[bash output, text, cleared]\nFull output: {path}"
        assert Path(path).read_text(encoding="utf-8") == LINES


def test_a_summary_names_absolute_and_home_paths_as_they_are(tmp_path: Path) -> None:
    """Issue 13, item 19: the model must open /etc/nginx/nginx.conf, not etc/nginx/..."""
    listing = "config in /etc/nginx/nginx.conf\nuser file ~/app/settings.py\n" + "x\n" * 3_000
    session = [("bash", listing), *[("ls", "a.py") for _ in range(5)]]
    with middleware.Pipeline.from_policy(policy_file(tmp_path)) as pipe:
        summary = pipe.process(tool_session(*session)).messages[2]["content"]
    assert "Mentions: /etc/nginx/nginx.conf, ~/app/settings.py" in summary
