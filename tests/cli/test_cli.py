"""The installed console script, run in a subprocess."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from locations import EXAMPLES, REPO

import middleware

SCRIPT = Path(sys.executable).parent / "chatcli-mw"


def run(
    *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )


def write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


BROKEN = [
    {"role": "user", "content": "List files."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
]  # fmt: skip


def test_version_and_help() -> None:
    assert run("--version").stdout.strip() == f"chatcli-mw {middleware.__version__}"
    help_text = run("--help").stdout
    assert "examples:" in help_text
    assert "chatcli-mw process session.json" in help_text


def test_process_a_list_to_stdout(tmp_path: Path) -> None:
    done = run("process", str(write(tmp_path, "h.json", BROKEN)), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cleaned = json.loads(done.stdout)
    assert cleaned[:2] == BROKEN
    assert cleaned[2]["role"] == "tool"
    assert cleaned[2]["tool_call_id"] == "call_1"
    assert "pairing: 1 synthetic result" in done.stderr
    assert "messages: 2 -> 3" in done.stderr


def test_process_a_body_keeps_its_other_keys_and_writes_output(tmp_path: Path) -> None:
    body = {"model": "gpt-4o", "temperature": 0, "messages": BROKEN}
    out = tmp_path / "out.json"
    done = run(
        "process",
        str(write(tmp_path, "b.json", body)),
        "-o",
        str(out),
        "--report",
        "json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    cleaned = json.loads(out.read_text(encoding="utf-8"))
    assert (cleaned["model"], cleaned["temperature"], len(cleaned["messages"])) == ("gpt-4o", 0, 3)
    report = json.loads(done.stderr)
    assert report["actions"][0]["kind"] == "synthetic_result"


def test_responses_body_and_stdin(tmp_path: Path) -> None:
    body = json.loads((EXAMPLES / "responses-body.json").read_text(encoding="utf-8"))
    done = run("process", "-", stdin=json.dumps(body), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)["input"]
    assert items[-1] == {
        "type": "function_call_output",
        "call_id": "call_w2",
        "output": items[-1]["output"],
    }
    assert "format: responses" in done.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "{not json",
            "not JSON: Expecting property name enclosed in double quotes (line 1, column 2)",
        ),
        ('{"messages": 5}', "history: expected a list of messages, got int"),
        ('[{"content": "x"}]', "message 0: message has no 'role'"),
        (
            '{"model": "m"}',
            "history: expected a list of messages, or a request body with a "
            "'messages', 'contents' or 'input' field, got a mapping with "
            "'model'",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, content: str, message: str) -> None:
    path = write(tmp_path, "bad.json", content)
    done = run("process", str(path), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == f"chatcli-mw: error: {path}: {message}\n"


def test_missing_file_and_unknown_format(tmp_path: Path) -> None:
    done = run("process", str(tmp_path / "nope.json"), cwd=tmp_path)
    assert done.returncode == 2
    assert "No such file or directory" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert run("process", "x.json", "--format", "cohere").returncode == 2


def test_check(tmp_path: Path) -> None:
    broken = run("check", str(write(tmp_path, "h.json", BROKEN)))
    assert broken.returncode == 1
    assert "[missing_result]" in broken.stdout
    fixed = run(
        "process", str(tmp_path / "h.json"), "-o", str(tmp_path / "fixed.json"), cwd=tmp_path
    )
    assert fixed.returncode == 0
    assert run("check", str(tmp_path / "fixed.json")).returncode == 0


def test_validate_and_config(tmp_path: Path) -> None:
    good = write(tmp_path, "good.yaml", "version: 1\nbudget:\n  max_result_chars: 30000\n")
    bad = write(tmp_path, "bad.yaml", "version: 1\nbudget:\n  max_result_char: 30000\n")
    assert run("validate", str(good)).returncode == 0
    failed = run("validate", str(good), str(bad))
    assert failed.returncode == 1
    assert f"{bad}:3:" in failed.stderr
    assert "did you mean 'max_result_chars'?" in failed.stderr
    shown = run("config", "--policy", str(good), "--show-origin", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"max_result_chars: 30000  # {good}:3" in shown.stdout


def test_plugins_lists_the_built_in_steps() -> None:
    listed = json.loads(run("plugins", "--json", "--tool", "read", "--tool", "nope").stdout)
    names = {p["name"] for p in listed["plugins"]}
    assert listed["tool_caps"] == {
        "read": {
            "plugin": "middleware.default_plugins.chatcli_tools",
            "max_chars": 80000,
            "exempt": False,
        },
        "nope": None,
    }
    assert {
        "middleware.steps.pairing",
        "middleware.steps.budget",
        "middleware.steps.microcompact",
    } <= names


def test_simulate_prints_a_table_and_json(tmp_path: Path) -> None:
    session = write(tmp_path, "s.json", [*BROKEN, {"role": "tool", "tool_call_id": "call_1",
                                                   "content": "a.py\n"},
                                         {"role": "assistant", "content": "Done."}])  # fmt: skip
    table = run("simulate", str(session), "--baselines", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "observation-masking" in table.stdout
    data = json.loads(run("simulate", str(session), "--json", cwd=tmp_path).stdout)
    assert [p["policy"] for p in data["policies"]] == ["none", "default"]
    assert data["policies"][0]["relative_cost"] == 1.0
    # A baseline also named with --policy is simulated once.
    baseline = REPO / "policies" / "baselines" / "previous-default.yaml"
    both = run(
        "simulate",
        str(session),
        "--json",
        "--baselines",
        "--policy",
        "default",
        "--policy",
        str(baseline),
        cwd=tmp_path,
    )
    names = [p["policy"] for p in json.loads(both.stdout)["policies"]]
    assert names.count("previous-default") == 1
    assert "observation-masking" in names


def test_simulate_draws_a_plot(tmp_path: Path) -> None:
    session = write(tmp_path, "s.json", [*BROKEN, {"role": "tool", "tool_call_id": "call_1",
                                                   "content": "a.py\n"},
                                         {"role": "assistant", "content": "Done."}])  # fmt: skip
    picture = tmp_path / "cost.png"
    done = run("simulate", str(session), "--plot", str(picture), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert picture.read_bytes().startswith(b"\x89PNG")
    assert f"{picture}: 1 of 1 sessions drawn, those with the most model calls" in done.stderr


def test_every_series_of_a_plot_looks_different_and_the_baseline_stands_apart() -> None:
    from middleware.cli.plotting import style

    looks = {(s["color"], s["linestyle"]) for s in map(style, range(40))}
    assert len(looks) == 40
    assert style(0, baseline=True)["color"] == "black" and style(0)["color"] != "black"


def test_a_responses_body_with_a_string_input_is_left_as_is(tmp_path: Path) -> None:
    body = {"model": "gpt-4.1", "input": "Summarise README.md", "store": False}
    done = run("process", str(write(tmp_path, "r.json", body)), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == body
    assert done.stderr.startswith("format: responses (the request body's 'input' text)")
    assert "pairing: nothing to do" in done.stderr


def test_the_readme_quick_start_prints_what_the_readme_shows() -> None:
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    shown = readme.split("goes to stderr:\n\n```text\n", 1)[1].split("```", 1)[0]
    done = run("process", "examples/anthropic-interrupted.json", cwd=EXAMPLES.parent)
    assert done.returncode == 0, done.stderr
    assert done.stderr == shown


def test_subcommands_come_from_the_commands_tuple(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from middleware.cli import app as cli

    def add_hello(commands: Any) -> None:
        hello = commands.add_parser("hello", help="greet a file")
        hello.add_argument("file", metavar="FILE")
        hello.set_defaults(run=greet)

    def greet(args: Any) -> int:
        if args.file == "bad":
            raise middleware.InputError("cannot greet this")
        print(f"hello {args.file}")
        return 0

    parser = cli.build_parser()
    (subparsers,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(subparsers.choices) == [
        "process", "check", "validate", "config", "schema", "plugins", "simulate", "serve",
        "recall", "gc", "ledger",
    ]  # fmt: skip
    monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, add_hello))
    assert cli.main(["hello", "world"]) == 0
    assert capsys.readouterr().out == "hello world\n"
    assert cli.main(["hello", "bad"]) == 2
    assert capsys.readouterr().err == "chatcli-mw: error: bad: cannot greet this\n"


def test_presets_by_name_in_process_config_and_simulate(tmp_path: Path) -> None:
    session = write(
        tmp_path,
        "s.json",
        [
            {"role": "user", "content": "List files."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": ""}],
            },
            {"role": "assistant", "content": "Done."},
        ],
    )
    done = run("process", str(session), "--policy", "preset:claude-code", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(done.stdout)[2]["content"]
    assert result["content"] == "(ls completed with no output)"
    config = run("config", "--policy", "preset:ethos", cwd=tmp_path)
    assert 'turn_strategy: "even_split"' in config.stdout
    unknown = run("config", "--policy", "preset:nope", cwd=tmp_path)
    assert unknown.returncode == 2 and "claude-code, ethos, hermes, lean, pi" in unknown.stderr
    data = json.loads(run("simulate", str(session), "--presets", "--json", cwd=tmp_path).stdout)
    assert [p["policy"] for p in data["policies"]] == [
        "none", "default", "preset:chatcli", "preset:claude-code", "preset:ethos",
        "preset:hermes", "preset:lean", "preset:pi",
    ]  # fmt: skip


def test_process_keeps_the_spill_files_and_carries_decisions(tmp_path: Path) -> None:
    big = "".join(f"row {i}\n" for i in range(12_000))
    session = write(
        tmp_path, "s.json", [*BROKEN, {"role": "tool", "tool_call_id": "call_1", "content": big}]
    )
    state = tmp_path / "state.json"
    args = ("process", str(session), "--policy", "preset:claude-code", "--session", "t1")
    first = run(*args, "--decisions", str(state), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    preview = json.loads(first.stdout)[2]["content"]
    path = Path(preview.split("saved to: ", 1)[1].split("\n", 1)[0])
    assert path.read_text(encoding="utf-8") == big  # readable after the command ended
    assert "full outputs kept in: " in first.stderr
    assert json.loads(state.read_text(encoding="utf-8"))[0]["call_id"] == "call_1"
    # A later run under a policy that would keep the result whole still sends the preview.
    budget = "budget: {max_result_chars: 500000, declared_cap_ceiling: 500000}\n"
    policy = write(tmp_path, "p.yaml", f"version: 1\nextends: preset:claude-code\n{budget}")
    later = run(
        "process",
        str(session),
        "--policy",
        str(policy),
        "--session",
        "t1",
        "--decisions",
        str(state),
        cwd=tmp_path,
    )
    assert json.loads(later.stdout)[2]["content"] == preview
    without = run("process", str(session), "--policy", str(policy), cwd=tmp_path)
    assert json.loads(without.stdout)[2]["content"] == big
    state.write_text('[{"call_id": "x"}]', encoding="utf-8")
    bad = run(*args, "--decisions", str(state), cwd=tmp_path)
    assert bad.returncode == 2
    assert (
        bad.stderr
        == f"chatcli-mw: error: {state}: not a decision record (missing digest, text, made_by)\n"
    )


def test_plugins_explains_what_bounds_a_tool_under_a_policy() -> None:
    done = run("plugins", "--policy", "preset:claude-code", "--tool", "read", "--tool", "Read")
    assert done.returncode == 0, done.stderr
    assert (
        "tool read under policy claude-code: 50,000 chars (plugin middleware."
        "default_plugins.chatcli_tools, clamped by budget.declared_cap_ceiling)" in done.stdout
    )
    assert "tools.Read.exempt)" in done.stdout
    pi = json.loads(run("plugins", "--json", "--policy", "preset:pi", "--tool", "bash").stdout)
    assert pi["in_effect"] == {
        "policy": "pi",
        "bash": "line rule tail: 2,000 lines or 51,200 bytes",
    }


def test_a_format_the_body_chose_is_not_reported_as_given(tmp_path: Path) -> None:
    """Issue 13, item 20: `format: responses (given)` when no format was given."""
    done = run("process", str(EXAMPLES / "responses-body.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "format: responses (the request body's 'input' list)" in done.stderr
    given = run(
        "process", str(EXAMPLES / "responses-body.json"), "--format", "responses", cwd=tmp_path
    )
    assert "format: responses (given)" in given.stderr


@pytest.mark.parametrize(
    ("direct_url", "expected"),
    [
        (
            {"url": "file:///src/chatcli", "dir_info": {"editable": True}},
            "python -m pip install -e '/src/chatcli[plot]'",
        ),
        (
            {"url": "file:///src/chatcli", "dir_info": {}},
            "python -m pip install '/src/chatcli[plot]'",
        ),
        (
            {
                "url": "file:///w/dist/chatcli_middleware-1.0-py3-none-any.whl",
                "archive_info": {"hashes": {"sha256": "0" * 64}},
            },
            "python -m pip install '/w/dist/chatcli_middleware-1.0-py3-none-any.whl[plot]'",
        ),
        (None, "python -m pip install 'chatcli-middleware[plot]'"),
    ],
)
def test_a_missing_extra_names_the_command_that_works_for_this_installation(
    monkeypatch: pytest.MonkeyPatch, direct_url: dict[str, Any] | None, expected: str
) -> None:
    """Issue 13, item 20: a source checkout cannot `pip install 'chatcli-middleware[plot]'`."""
    from middleware.errors import MissingExtraError

    class Distribution:
        def read_text(self, name: str) -> str | None:
            assert name == "direct_url.json"
            return None if direct_url is None else json.dumps(direct_url)

    monkeypatch.setattr("middleware.errors.distribution", lambda name: Distribution())
    error = MissingExtraError("plot", "matplotlib>=3.7", "--plot")
    assert expected in str(error)
    assert "python -m pip install 'matplotlib>=3.7'" in str(error)
    assert isinstance(error, ImportError) and isinstance(error, middleware.MiddlewareError)
