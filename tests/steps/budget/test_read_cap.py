"""A file read through a shell tool (``sed -n '1,400p' f``) is bounded as a read, not as
a command's log: the generic per-result cap (``budget.max_result_chars``) cuts a command's
output, but a read is what the next edit quotes, so it gets ``budget.per_tool_default_chars``
as a tool that opts in does; a policy's own entry for the tool still wins."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from session_builders import tool_turn

import middleware

#: 300 lines of a file, 12,600 characters: over the 5,000 of the generic cap, under 30,000.
SOURCE = "".join(f"value_{n:04d} = compute(x_{n}, y_{n})  # {n}\n" for n in range(1, 301))
#: A command's output of the same size.
LOG = "".join(f"test_case_{n:04d} PASSED in 0.01s [{n:3d}%]\n" for n in range(1, 301))


def run(tmp_path: Path, command: str, output: str, **tools: Any) -> str:
    document: dict[str, Any] = {"version": 1, "spill": {"root": str(tmp_path / "spill")}}
    if tools:
        document["tools"] = tools
    path = tmp_path / "policy.yaml"
    path.write_text(json.dumps(document), encoding="utf-8")
    messages = [{"role": "user", "content": "Fix app.py."}]
    messages += tool_turn("toolu_01", "Bash", {"command": command}, output)
    with middleware.Pipeline.from_policy(path, session_id="cap") as pipe:
        out = pipe.process(messages, format="anthropic").messages
    (block,) = [
        b
        for m in out
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    content = block["content"]
    return content if isinstance(content, str) else "".join(b["text"] for b in content)


def test_a_shell_read_is_bounded_as_a_read(tmp_path: Path) -> None:
    assert len(SOURCE) > 5_000
    assert run(tmp_path, "sed -n '1,300p' /repo/app.py", SOURCE) == SOURCE


def test_a_commands_output_of_its_size_is_cut(tmp_path: Path) -> None:
    kept = run(tmp_path, "pytest -q", LOG)
    assert len(kept) < len(LOG)
    assert "sed -n" in kept or "recall" in kept or "saved" in kept


def test_a_read_over_the_per_tool_default_is_cut(tmp_path: Path) -> None:
    big = SOURCE * 4  # about 50,000 characters: over the cap by more than budget.min_saving
    kept = run(tmp_path, "cat /repo/app.py", big)
    assert len(kept) < 31_000
    assert "Bash" in kept and "cat /repo/app.py" in kept  # says to run the read again


def test_the_policys_entry_for_the_tool_wins(tmp_path: Path) -> None:
    kept = run(tmp_path, "sed -n '1,300p' /repo/app.py", SOURCE, Bash={"max_chars": 4000})
    assert len(kept) < len(SOURCE)


def test_a_log_files_read_keeps_a_logs_cap(tmp_path: Path) -> None:
    """``cat logs/worker.log`` reads a file, but a log's lines are a log's: cut at the
    generic cap as a command's output is."""
    kept = run(tmp_path, "cat logs/worker.log", LOG)
    assert len(kept) < len(LOG)
