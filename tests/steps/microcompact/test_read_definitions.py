"""The summary of a read of a source file keeps its first imports and definitions
(microcompact.reads.definitions_chars, the summary template's {definitions}): the agent
that writes code against the module copies its imports, one going back to a function
finds it by name; a read of another file, and a command's output, keep none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from read_builders import history, process, turn

from middleware.steps.definitions import FIRST_OF, definition_lines

#: A Python module as Claude Code's Read numbers it: imports, then many functions.
MODULE = "\n".join(
    [
        "import re",
        "from sphinx.application import Sphinx",
        "",
        *(
            line
            for n in range(40)
            for line in (f"def handler_{n:02d}(app: Sphinx) -> None:", f"    app.emit('e{n}')", "")
        ),
    ]
)
NUMBERED = "".join(f"{n:6d}→{line}\n" for n, line in enumerate(MODULE.split("\n"), 1))


def read(path: str, text: str = NUMBERED) -> list[dict[str, Any]]:
    return turn(0, "Read", {"file_path": path}, text)


def bash(i: int) -> list[dict[str, Any]]:
    return turn(i, "Bash", {"command": f"pytest -k case_{i}"}, f"case {i}: " + "ok\n" * 400)


def summary_of(tmp_path: Path, first: list[dict[str, Any]], **microcompact: Any) -> str:
    """The first result once it is eleven turns old (out of the read's protection)."""
    messages = history(first, *(bash(i) for i in range(1, 12)))
    text = process(tmp_path, messages, **microcompact)["toolu_00"]
    assert text.startswith("[Old tool result cleared")
    return text


def test_a_read_of_a_source_file_keeps_its_first_definitions_within_the_budget(
    tmp_path: Path,
) -> None:
    summary = summary_of(tmp_path, read("/repo/src/handlers.py"))
    cut = summary.index("\nImports and definitions")
    kept = summary[cut:]
    shown = kept.split("\n")[2:]
    assert kept.startswith(FIRST_OF.format(shown=len(shown), total=42))
    assert len(kept) <= 300  # reads.definitions_chars
    # As the read printed them, its numbers included: the agent can read those lines back.
    assert shown[:3] == [
        "1→import re",
        "2→from sphinx.application import Sphinx",
        "4→def handler_00(app: Sphinx) -> None:",
    ]
    assert "Not all of /repo/src/handlers.py is shown: read it again with Read" in summary


def test_a_shell_read_of_a_source_file_keeps_them_too(tmp_path: Path) -> None:
    summary = summary_of(
        tmp_path, turn(0, "exec_command", {"cmd": "cat src/handlers.py"}, MODULE + "\n")
    )
    assert "\nimport re\nfrom sphinx.application import Sphinx\ndef handler_00(" in summary
    assert 'read it again with exec_command (cmd: "cat src/handlers.py")' in summary


@pytest.mark.parametrize(
    ("first", "microcompact"),
    [
        (read("/repo/docs/handlers.md"), {}),  # not source code, by its name
        (turn(0, "Bash", {"command": "python -m build"}, MODULE + "\n"), {}),  # no read
        (read("/repo/src/handlers.py"), {"reads": {"definitions_chars": 0}}),
        (
            read("/repo/src/handlers.py"),
            {"summary_template": "[Old tool result cleared — {lines} lines. Full output: {path}]"},
        ),
    ],
    ids=["markdown", "command-output", "off", "template-without-the-field"],
)
def test_no_definitions_for_another_file_a_command_or_when_asked_for_none(
    tmp_path: Path, first: list[dict[str, Any]], microcompact: dict[str, Any]
) -> None:
    summary = summary_of(tmp_path, first, **microcompact)
    assert "Imports and definitions" not in summary
    assert not any(line in summary.split("\n") for line in definition_lines(MODULE))
