"""A summary's ``Error line:`` entries come from logs and command results only: the lines of
a file (a read, numbered lines, source code) are code, not failures, and a model that reads
``Error line: 53→ errors = load_errors(session_record)`` may take it for one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from session_builders import tool_turn

import middleware
from middleware.steps.file_text import is_file_text
from middleware.steps.line_kinds import ERROR, error_lines, severities

#: Elixir code that says "error" on many lines, none of them a failure.
CODE = [
    "defmodule Spotter.Sessions do",
    "  def summary(session_record) do",
    "    errors = load_errors(session_record)",
    "    case fetch(session_record) do",
    "      {:ok, record} -> render(record, errors: errors)",
    "      {:error, _} ->",
    '        Logger.warning("fetch failed")',
    "    end",
    "  end",
    "  render_errors: [",
    "    formats: [html: SpotterWeb.ErrorHTML, json: SpotterWeb.ErrorJSON],",
    "  ]",
]
#: A test run that failed: what the model must see again in the summary.
TEST_RUN = (
    "".join(f"tests/test_mod.py::test_case_{n} PASSED\n" for n in range(300))
    + "FAILED tests/test_mod.py::test_load - KeyError: 'session_record'\n"
    + "E   KeyError: 'session_record'\n"
    + "=== 1 failed, 300 passed in 3.21s ===\n"
)


def claude_read(lines: list[str], first: int = 1) -> str:
    """``lines`` as Claude Code's Read shows them: ``    53→code``."""
    return "".join(f"{n:>6}→{line}\n" for n, line in enumerate(lines, first))


def cat_n(lines: list[str]) -> str:
    """``lines`` as ``cat -n`` (and ``nl -ba``) print them: ``    53\\tcode``."""
    return "".join(f"{n:>6}\t{line}\n" for n, line in enumerate(lines, 1))


def source(repeat: int) -> list[str]:
    return [line.replace("summary", f"summary_{i}") for i in range(repeat) for line in CODE]


def summarise(tmp_path: Path, name: str, arguments: dict[str, Any], output: str) -> str:
    """The summary the default policy makes of one old ``name`` result of ``output``."""
    document = {
        "version": 1,
        "spill": {"root": str(tmp_path / "spill")},
        "budget": {"max_result_chars": 100_000},  # summarised from whole results
        "microcompact": {"schedule": {"rewrite_cost": 0}, "reads": {"protect_turns": 0}},
    }
    policy = tmp_path / "policy.yaml"
    tmp_path.mkdir(parents=True, exist_ok=True)
    policy.write_text(json.dumps(document), encoding="utf-8")
    messages: list[Any] = [{"role": "user", "content": "Fix the summary."}]
    messages += tool_turn("toolu_00", name, arguments, output)
    for i in range(1, 6):
        messages += tool_turn(f"toolu_{i:02d}", "Bash", {"command": f"ls {i}"}, f"file_{i}.ex")
    with middleware.Pipeline.from_policy(policy, session_id="errs") as pipe:
        out = pipe.process(messages, format="anthropic").messages
    summary = out[2]["content"][0]["content"]
    assert isinstance(summary, str)
    assert summary.startswith("[Old tool result cleared"), summary[:200]
    return summary


def test_a_read_of_source_code_keeps_no_error_lines(tmp_path: Path) -> None:
    read = claude_read(source(30))
    summary = summarise(tmp_path, "Read", {"file_path": "/repo/lib/sessions.ex"}, read)
    assert "Error line:" not in summary
    assert "read it again with Read" in summary


def test_numbered_lines_from_a_shell_keep_no_error_lines(tmp_path: Path) -> None:
    """``cat -n`` in Bash: a command result, but a file's content by its shape."""
    for i, text in enumerate((cat_n(source(30)), claude_read(source(30), first=40))):
        summary = summarise(tmp_path / str(i), "Bash", {"command": "cat -n lib/x.ex"}, text)
        assert "Error line:" not in summary


def test_source_code_from_a_shell_keeps_no_error_lines(tmp_path: Path) -> None:
    python = "".join(
        f"import logging\n\ndef load_errors_{n}(record):\n    errors = []\n"
        f"    raise ValueError('load failed')\n    return errors\n\n"
        for n in range(60)
    )
    summary = summarise(tmp_path, "Bash", {"command": "cat lib/errors.py"}, python)
    assert "Python source" in summary
    assert "Error line:" not in summary


def test_a_failed_test_run_keeps_its_error_lines(tmp_path: Path) -> None:
    summary = summarise(tmp_path, "Bash", {"command": "pytest"}, TEST_RUN)
    assert (
        "\nError line: FAILED tests/test_mod.py::test_load - KeyError: 'session_record'"
        "\nError line: E   KeyError: 'session_record'"
        "\nError line: === 1 failed, 300 passed in 3.21s ==="
    ) in summary


def test_a_log_keeps_its_error_lines_and_not_its_mentions_of_errors(tmp_path: Path) -> None:
    log = (
        "".join(
            f"12:00:{n % 60:02d} [info] request {n} handled, 0 errors so far\n" for n in range(150)
        )
        + "12:03:00 [error] GenServer Spotter.Sync terminating\n"
        + "** (KeyError) key :session_record not found\n"
    )
    # A command's log (``tail -n 200 log/dev.log`` would be a read of the file: its summary
    # says to read it again, test_shell_reads.py).
    summary = summarise(tmp_path, "Bash", {"command": "journalctl -u spotter -n 200"}, log)
    assert "\nError line: 12:03:00 [error] GenServer Spotter.Sync terminating" in summary
    assert "0 errors so far" not in summary


def test_the_same_result_gets_the_same_summary(tmp_path: Path) -> None:
    first = summarise(tmp_path / "a", "Bash", {"command": "pytest"}, TEST_RUN)
    again = summarise(tmp_path / "b", "Bash", {"command": "pytest"}, TEST_RUN)
    assert first.replace("/a/", "/b/") == again


@settings(max_examples=60)
@given(
    st.lists(
        st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=60),
        min_size=3,
        max_size=40,
    ),
    st.sampled_from([claude_read, cat_n]),
)
def test_numbered_lines_are_a_file_whatever_they_say(lines: list[str], number: Any) -> None:
    text = number([f"raise RuntimeError('FAILED: {line}')" for line in lines])
    assert is_file_text(text)


@settings(max_examples=60)
@given(st.lists(st.sampled_from(TEST_RUN.splitlines()), min_size=1, max_size=30))
def test_error_lines_are_those_of_the_text_in_order(lines: list[str]) -> None:
    text = "\n".join(lines)
    found = error_lines(text, 3)
    assert len(found) <= 3
    position = 0
    for line in found:
        position = text.index(line, position)
    assert not is_file_text(text)


PIECES = ["FAILED", " failed", "error: x", "E   Boom", "KeyError: 'k'", "ok", "  ", "é", "\u0130"]
PIECES += ["\n", "\r\n", "\u2028", "Traceback (most recent call last):", "3 failed", "warn: y"]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join), st.integers(0, 4))
def test_error_lines_are_the_lines_the_outline_calls_errors(text: str, limit: int) -> None:
    """One definition of an error line: the summary's are the first the outline's rules
    find (``severities``), stripped and clipped."""
    lines = severities(text, 0, len(text))
    expected = [
        text[at : text.find("\n", at) if "\n" in text[at:] else len(text)].strip()[:200]
        for at, level in sorted(lines.items())
        if level == ERROR
    ]
    assert error_lines(text, limit) == expected[:limit]


def test_a_read_compacted_before_a_spill_is_summarised_as_a_read(tmp_path: Path) -> None:
    """Hermes' context-aware ceiling compacts old results to make room (compaction
    before spill): a file read among them is summarised as any read is, with the sentence
    that says to read the file again and no error lines."""
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for i in range(5):
        name, arguments = (
            ("read_file", {"file_path": f"/repo/lib/s{i}.ex"})
            if i == 0
            else ("bash", {"command": f"make {i}"})
        )
        output = claude_read(source(80)) if i == 0 else "ok\n" * 15_000
        messages += tool_turn(f"t{i}", name, arguments, output)
    policy = middleware.load_policy(
        "preset:hermes",
        env={},
        dotenv_path=False,
        overrides={
            "spill.root": str(tmp_path),
            "budget.context_aware.window_tokens": 32_768,
            "microcompact.error_lines": 3,
            "microcompact.summary_template": "[Old tool output cleared. Full output: {path}]"
            "\n[{recall}]{mentions}{errors}",
        },
    )
    with middleware.Pipeline(policy, session_id="hermes") as pipe:
        out = pipe.process(messages, format="anthropic").messages
    summary = out[2]["content"][0]["content"]
    assert summary.startswith("[Old tool output cleared."), summary[:300]
    assert "Not all of /repo/lib/s0.ex is shown: read it again with read_file" in summary
    assert "Error line:" not in summary
