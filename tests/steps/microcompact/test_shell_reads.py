"""Shell reads are file reads: a command that prints a file (``sed -n '1,80p' f``, ``cat
f``, ``Get-Content f``) is kept whole in the protected window while a command's output of
the same age is compacted, released when the file is read again or written (by any tool,
however the path is written) or when the window is full, and once compacted it says to
run the command that read it again (microcompact.reads, the agent_tools declarations)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import read_builders
from read_builders import history, policy, turn

import middleware

#: A file's text as ``sed -n '1,80p'`` prints it: short enough for the per-result cap.
SOURCE = "".join(f"value_{n:04d} = compute(x_{n}, y_{n})  # line {n}\n" for n in range(1, 81))
#: A command's output of the same size.
OUTPUT = "".join(f"test_case_{n:04d} PASSED in 0.01s [{n}%]   \n" for n in range(1, 81))
SED = "sed -n '1,80p' /repo/app.py"


def bash(i: int, command: str = "", output: str = OUTPUT) -> list[dict[str, Any]]:
    return turn(i, "Bash", {"command": command or f"pytest -k case_{i}"}, output)


def process(tmp_path: Path, messages: list[dict[str, Any]], **microcompact: Any) -> dict[str, str]:
    return read_builders.process(tmp_path, messages, session="sh", **microcompact)


def compacted(text: str) -> bool:
    return text.startswith("[Old tool result cleared")


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("Bash", {"command": SED}),
        ("Bash", {"command": "cd /repo && nl -ba app.py | sed -n '1,80p'"}),
        ("exec_command", {"cmd": "sed -n '1,80p' app.py", "workdir": "/repo"}),
        ("shell", {"command": ["bash", "-lc", "cat app.py"], "workdir": "/repo"}),
        ("PowerShell", {"command": "Get-Content D:\\repo\\app.py -TotalCount 80"}),
        ("run_shell_command", {"command": "head -n 80 app.py", "directory": "/repo"}),
    ],
)
def test_a_shell_read_is_kept_whole_while_an_output_of_its_age_is_compacted(
    tmp_path: Path, name: str, arguments: dict[str, Any]
) -> None:
    messages = history(turn(0, name, arguments, SOURCE), bash(1), *(bash(i) for i in range(2, 6)))
    out = process(tmp_path, messages)
    assert out["toolu_00"] == SOURCE
    assert compacted(out["toolu_01"])  # younger, and compacted: it is no read


EDIT = {"file_path": "/repo/app.py", "old_string": "x_1,", "new_string": "x_2,"}


def patch(*lines: str) -> list[dict[str, Any]]:
    """Codex's apply_patch of ``lines`` at turn 2."""
    text = "\n".join(("*** Begin Patch", *lines, "*** End Patch"))
    return turn(2, "apply_patch", {"input": text}, "Done!")


@pytest.mark.parametrize(
    ("later", "released"),
    [
        # read again, all of it
        (turn(2, "Read", {"file_path": "/repo/app.py"}, SOURCE), True),
        (bash(2, "cat app.py", SOURCE), True),  # a relative path names the file too
        (bash(2, "sed -n '1,200p' /repo/app.py", SOURCE), True),  # lines holding all of it
        (bash(2, "sed -n '1,40p' /repo/app.py", SOURCE[:1800]), False),  # a part of it
        (bash(2, "grep -n compute /repo/app.py", SOURCE[:900]), False),
        (bash(2, "cat /repo/other.py", SOURCE), False),
        # written: replaced, created, deleted
        (turn(2, "Write", {"file_path": "/repo/app.py", "content": "x = 1\n"}, "ok"), True),
        (bash(2, "cat > /repo/app.py <<'EOF'\nx = 1\nEOF", ""), True),
        (patch("*** Delete File: /repo/app.py"), True),
        (patch("*** Add File: /repo/app.py", "+x = 1"), True),
        # edited: the rest of the read is what the next edit quotes
        (turn(2, "Edit", EDIT, "ok"), False),
        (bash(2, "sed -i 's/x_1,/x_2,/' /repo/app.py", ""), False),
        (patch("*** Update File: /repo/app.py", "@@", "-x_1,", "+x_2,"), False),
    ],
)
def test_what_supersedes_a_shell_read(
    tmp_path: Path, later: list[dict[str, Any]], released: bool
) -> None:
    messages = history(bash(0, SED, SOURCE), bash(1), later, *(bash(i) for i in range(3, 7)))
    assert compacted(process(tmp_path, messages)["toolu_00"]) is released


def test_a_shell_read_leaves_the_protected_window_when_newer_reads_fill_it(
    tmp_path: Path,
) -> None:
    reads = [bash(i, f"cat /repo/m{i}.py", SOURCE) for i in range(4)]
    messages = history(*reads, *(bash(i) for i in range(4, 8)))
    out = process(tmp_path, messages, reads={"protect_tokens": 1_500})
    # About 950 tokens each (4 characters a token): the reads after each of the first two
    # fill the 1,500 tokens of the window, releasing them; the last two are kept.
    assert [compacted(out[f"toolu_{i:02d}"]) for i in range(4)] == [True, True, False, False]


@pytest.mark.parametrize(
    ("name", "arguments", "file", "said"),
    [
        ("Bash", {"command": SED}, "/repo/app.py", f'Bash (command: "{SED}")'),
        (
            "exec_command",
            {"cmd": "sed -n '1,80p' src/app.py", "workdir": "/repo", "yield_time_ms": 1000},
            "/repo/src/app.py",
            'exec_command (cmd: "sed -n \'1,80p\' src/app.py", workdir: "/repo")',
        ),
        ("PowerShell", {"command": "gc app.py"}, "app.py", 'PowerShell (command: "gc app.py")'),
    ],
)
def test_a_compacted_shell_read_says_to_run_the_command_again(
    tmp_path: Path, name: str, arguments: dict[str, Any], file: str, said: str
) -> None:
    messages = history(turn(0, name, arguments, SOURCE), *(bash(i) for i in range(1, 5)))
    summary = process(tmp_path, messages, reads={"protect_turns": 1, "protect_part_turns": 1})[
        "toolu_00"
    ]
    assert compacted(summary)
    assert f"[Not all of {file} is shown: read it again with {said} before acting on it]" in (
        summary
    )
    assert "Mentions:" not in summary  # the file is what the model reads again


def mini_swe_agent(commands: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A mini-swe-agent history: each (command, output) one ```bash action and its
    observation."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You run bash."},
        {"role": "user", "content": "Fix the bug."},
    ]
    for i, (command, output) in enumerate(commands):
        messages += [
            {"role": "assistant", "content": f"THOUGHT: step {i}.\n\n```bash\n{command}\n```"},
            {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{output}</output>"},
        ]
    return messages


def observations(tmp_path: Path, messages: list[dict[str, Any]]) -> list[str]:
    with middleware.Pipeline.from_policy(policy(tmp_path), session_id="mini") as pipe:
        out = pipe.process(messages, format="openai").messages
    return [m["content"] for m in out if m["role"] == "user"][1:]


def test_a_text_agents_shell_read_is_its_answers_command(tmp_path: Path) -> None:
    """mini-swe-agent's observation of ``nl -ba app.py | sed -n '1,80p'`` is a read of
    app.py: kept whole while the test output after it is compacted; its summary, once
    released by a write of the file, says to run the command again."""
    read = ("nl -ba app.py | sed -n '1,80p'", SOURCE)
    tests = [(f"pytest -k case_{i}", OUTPUT) for i in range(5)]
    kept = observations(tmp_path / "kept", mini_swe_agent([read, *tests]))
    assert kept[0].endswith(f"{SOURCE}</output>")
    assert compacted(kept[1])
    write = ("printf 'x = 1\\n' > app.py", "")
    written = observations(tmp_path / "written", mini_swe_agent([read, tests[0], write, *tests]))
    assert compacted(written[0])
    said = "read it again with bash (command: \"nl -ba app.py | sed -n '1,80p'\\n\")"
    assert said in written[0]


def codex(items: list[tuple[str, dict[str, Any] | str, str]]) -> list[dict[str, Any]]:
    """A Codex CLI history (Responses items): each (tool, arguments or patch, output) a
    call and its output; ``apply_patch`` a custom tool whose input is the patch."""
    history: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix."}]}
    ]
    for i, (tool, arguments, output) in enumerate(items):
        if tool == "apply_patch":
            history.append(
                {"type": "custom_tool_call", "call_id": f"c{i}", "name": tool, "input": arguments}
            )
            history.append(
                {"type": "custom_tool_call_output", "call_id": f"c{i}", "output": output}
            )
            continue
        history.append({"type": "function_call", "call_id": f"c{i}", "name": tool,
                        "arguments": json.dumps(arguments)})  # fmt: skip
        history.append({"type": "function_call_output", "call_id": f"c{i}", "output": output})
    return history


def codex_outputs(tmp_path: Path, history: list[dict[str, Any]]) -> dict[str, str]:
    with middleware.Pipeline.from_policy(policy(tmp_path), session_id="cx") as pipe:
        out = pipe.process(history, format="responses").messages
    return {item["call_id"]: item["output"] for item in out if item["type"].endswith("_output")}


def test_a_codex_read_is_kept_until_a_patch_deletes_the_file(tmp_path: Path) -> None:
    """Codex's exec_command from a workdir reads /repo/app.py; a patch naming app.py
    relative to the same directory writes it (a patch that updates it only edits it)."""
    read = ("exec_command", {"cmd": "sed -n '1,80p' app.py", "workdir": "/repo"}, SOURCE)
    tests = [("exec_command", {"cmd": f"pytest -k case_{i}"}, OUTPUT) for i in range(5)]
    update = (
        "apply_patch",
        "*** Begin Patch\n*** Update File: app.py\n@@\n-x\n+y\n*** End Patch",
        "Success.",
    )
    delete = ("apply_patch", "*** Begin Patch\n*** Delete File: app.py\n*** End Patch", "Done.")
    kept = codex_outputs(tmp_path / "kept", codex([read, tests[0], update, *tests[1:]]))
    assert kept["c0"] == SOURCE
    assert compacted(kept["c1"])
    gone = codex_outputs(tmp_path / "gone", codex([read, tests[0], delete, *tests[1:]]))
    assert compacted(gone["c0"])
    assert 'exec_command (cmd: "sed -n \'1,80p\' app.py", workdir: "/repo")' in gone["c0"]


@pytest.mark.parametrize(
    ("command", "part"),
    [
        (SED, True),
        ("head -n 80 /repo/app.py", True),
        ("grep -n compute /repo/app.py", True),
        ("tail -n 80 /repo/app.py", True),
        ("cat /repo/app.py", False),
        ("nl -ba /repo/app.py", False),
    ],
)
def test_a_read_of_a_part_of_a_file_is_kept_for_the_turns_of_a_part(
    tmp_path: Path, command: str, part: bool
) -> None:
    messages = history(bash(0, command, SOURCE), *(bash(i) for i in range(1, 8)))
    longer = process(tmp_path / "a", messages, reads={"protect_turns": 2, "protect_part_turns": 12})
    assert compacted(longer["toolu_00"]) is not part
    shorter = process(
        tmp_path / "b", messages, reads={"protect_turns": 12, "protect_part_turns": 2}
    )
    assert compacted(shorter["toolu_00"]) is part


def test_a_read_of_a_part_leaves_its_own_protected_window(tmp_path: Path) -> None:
    reads = [bash(i, f"sed -n '1,80p' /repo/m{i}.py", SOURCE) for i in range(4)]
    messages = history(*reads, *(bash(i) for i in range(4, 8)))
    out = process(
        tmp_path, messages, reads={"protect_tokens": 100_000, "protect_part_tokens": 1_500}
    )
    # As in the window of whole reads above: the first two are released, the last two kept.
    assert [compacted(out[f"toolu_{i:02d}"]) for i in range(4)] == [True, True, False, False]
