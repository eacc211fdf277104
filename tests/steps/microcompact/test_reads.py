"""File reads: kept whole in the protected window, released early when superseded or when
the window is full, and summarised with a sentence that says to read the file again with
the agent's own tool (microcompact.reads, the tool_file_access hook)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from read_builders import history, policy, process, results, turn
from session_builders import pipeline_for

import middleware
from middleware import FileAccess, FileUse, hookimpl
from middleware.plugin.host import PluginHost

#: A file's text as Claude Code's Read returns it: numbered lines.
LINES = "".join(f"{n}\tvalue_{n:04d} = compute(x_{n}, y_{n})  # line {n}\n" for n in range(1, 161))


def read(i: int, path: str = "/repo/app.py", **part: int) -> list[dict[str, Any]]:
    return turn(i, "Read", {"file_path": path, **part}, LINES)


def bash(i: int) -> list[dict[str, Any]]:
    return turn(i, "Bash", {"command": f"pytest -k case_{i}"}, f"case {i}: " + "ok\n" * 400)


def test_a_read_is_kept_whole_for_protect_turns_then_summarised(tmp_path: Path) -> None:
    """A Bash output is summarised from age 2; the read beside it stays whole until it is
    ten turns old, then becomes a summary that says to read the file again with Read."""
    for later in (8, 9):  # the read is `later + 1` turns old at the last request
        messages = history(read(0), bash(1), *(bash(i) for i in range(2, 2 + later)))
        out = process(tmp_path / str(later), messages)
        assert out["toolu_01"].startswith("[Old tool result cleared")
        if later == 8:
            assert out["toolu_00"] == LINES
        else:
            summary = out["toolu_00"]
            assert summary.startswith("[Old tool result cleared — 160 lines")
            assert "Not all of /repo/app.py is shown: read it again with Read before" in summary
            assert "Mentions:" not in summary  # the file is the source, not a token list
            assert "/chatcli-agent-rd/tool-results/toolu_00-" in summary  # nothing lost


def test_a_read_of_the_same_file_again_releases_the_earlier_one(tmp_path: Path) -> None:
    messages = history(read(0), bash(1), bash(2), read(3), bash(4), bash(5), bash(6))
    out = process(tmp_path, messages)
    assert out["toolu_00"].startswith("[Old tool result cleared")  # superseded by toolu_03
    assert out["toolu_03"] == LINES  # the newer read is the one to act on


@pytest.mark.parametrize(
    ("later", "released"),
    [
        (turn(3, "Write", {"file_path": "/repo/app.py", "content": "new"}, "ok"), True),
        (read(3, offset=1, limit=50), False),  # a part does not supersede the whole
        (read(3, path="/repo/other.py"), False),
        (
            turn(
                3, "Edit", {"file_path": "/repo/app.py", "old_string": "a", "new_string": "b"}, "ok"
            ),
            False,
        ),  # an edit changes a part: the rest is still the read's
    ],
)
def test_what_supersedes_a_read(
    tmp_path: Path, later: list[dict[str, Any]], released: bool
) -> None:
    messages = history(read(0), bash(1), bash(2), later, bash(4), bash(5), bash(6))
    compacted = process(tmp_path, messages)["toolu_00"].startswith("[Old tool result cleared")
    assert compacted is released


def test_a_part_read_again_supersedes_the_same_part(tmp_path: Path) -> None:
    messages = history(
        read(0, offset=40, limit=20),
        bash(1),
        bash(2),
        read(3, offset=40, limit=20),
        *(bash(i) for i in range(4, 8)),
    )
    out = process(tmp_path, messages)
    assert "read it again with Read (offset: 40, limit: 20) before" in out["toolu_00"]


def test_the_window_releases_reads_older_than_its_newest_tokens(tmp_path: Path) -> None:
    """With a window of 2,000 tokens (8,000 characters of reads), the read behind three
    newer reads of other files is released at age 2; the newest stay."""
    files = [read(i, path=f"/repo/m{i}.py") for i in range(4)]
    messages = history(*files, bash(4), bash(5))
    out = process(tmp_path, messages, reads={"protect_tokens": 2000})
    assert out["toolu_00"].startswith("[Old tool result cleared")
    assert out["toolu_03"] == LINES


def test_protect_turns_zero_compacts_reads_like_any_result(tmp_path: Path) -> None:
    messages = history(read(0), bash(1), bash(2), bash(3))
    out = process(tmp_path, messages, reads={"protect_turns": 0})
    assert out["toolu_00"].startswith("[Old tool result cleared")


def test_a_read_is_not_cut_below_the_read_tools_own_bound(tmp_path: Path) -> None:
    """Read's 20,000-character result stays whole where a Bash output of that size is
    cut at the 5,000-character cap; over Read's own bound it is cut too, and the preview
    says to read the file again."""
    big = LINES * 4
    messages = history(
        turn(0, "Read", {"file_path": "/repo/app.py"}, big),
        turn(1, "Bash", {"command": "./build.sh"}, big),
    )
    out = process(tmp_path, messages)
    assert out["toolu_00"] == big
    assert len(out["toolu_01"]) <= 5000
    huge = "\n".join(f"{n}\t" + "x" * 120 for n in range(1, 1200))
    out = process(tmp_path / "huge", history(turn(0, "Read", {"file_path": "/repo/big.py"}, huge)))
    assert len(out["toolu_00"]) <= 100_000
    assert "Not all of /repo/big.py is shown: read it again with Read before" in out["toolu_00"]


def test_a_third_party_plugin_declares_a_read_tool(tmp_path: Path) -> None:
    class ViewFile:
        @hookimpl
        def tool_file_access(self, tool_name: str) -> FileAccess | None:
            if tool_name == "view_file":
                return FileAccess("read", ("path",), ("start", "end"))
            return None

    messages = history(
        turn(0, "view_file", {"path": "src/x.rs", "start": 3}, LINES),
        *(bash(i) for i in range(1, 13)),
    )
    pipe = pipeline_for(
        policy(tmp_path, schedule={"rewrite_cost": 0}, reads={"protect_part_turns": 10}),
        ViewFile(),
        session_id="vf",
    )
    with pipe:
        out = results(pipe.process(messages, format="anthropic").messages)
    said = "Not all of src/x.rs is shown: read it again with view_file (start: 3)"
    assert said in out["toolu_00"]


def test_a_plugin_answering_with_a_wrong_type_is_reported_and_ignored(tmp_path: Path) -> None:
    class Wrong:
        @hookimpl
        def tool_file_access(self, tool_name: str) -> object:
            return {"action": "read"}

    host = PluginHost.create(load_entrypoints=False)
    host.register(Wrong(), name="wrong")
    problems: list[middleware.ProblemReport] = []
    assert host.tool_file_access("Read", problems) == FileAccess(
        "read", ("file_path",), ("offset", "limit", "pages")
    )
    assert [(p.plugin, p.hook) for p in problems] == [("wrong", "tool_file_access")]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"action": "open", "path_arguments": ("p",)}, "action"),
        ({"action": "read", "path_arguments": ()}, "at least one"),
        ({"action": "read", "path_arguments": ["p"]}, "tuple"),
        ({"action": "read", "path_arguments": ("p",), "range_arguments": ("",)}, "tuple"),
        ({"action": "edit"}, "at least one"),
        ({"action": "shell"}, "command_arguments"),
        ({"action": "shell", "command_arguments": ("c",), "dialect": "fish"}, "dialect"),
        ({"action": "patch", "patch_arguments": "input"}, "tuple"),
    ],
)
def test_file_access_validates_its_values(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FileAccess(**kwargs)


def test_file_access_reads_the_path_and_the_part_of_a_call() -> None:
    access = FileAccess("read", ("filePath", "file_path"), ("offset", "limit"))
    assert access.path({"file_path": "/a.py", "offset": 3}) == "/a.py"
    assert access.path({"filePath": "/b.py", "file_path": "/a.py"}) == "/b.py"
    assert access.path({"file_path": ""}) is None
    assert access.path("not a mapping") is None
    assert access.part({"file_path": "/a.py", "offset": 3}) == (("offset", "3"),)
    many = FileAccess("read", ("include",))
    assert many.path({"include": ["src/a.ts", "docs/"]}) == "src/a.ts, docs/"


def test_file_access_says_what_a_call_reads_writes_and_edits() -> None:
    read = FileAccess("read", ("file_path",), ("offset",))
    assert read.use({"file_path": "/a.py", "offset": 3}) == FileUse(
        ((("/a.py", (("offset", "3"),))),)
    )
    assert FileAccess("write", ("path",)).use({"path": "/a.py"}) == FileUse(writes=("/a.py",))
    assert FileAccess("edit", ("path",)).use({"path": "/a.py"}) == FileUse(edits=("/a.py",))
    shell = FileAccess("shell", command_arguments=("cmd",), workdir_arguments=("workdir",))
    assert shell.use({"cmd": "sed -n '1,9p' a.py", "workdir": "/p"}) == FileUse(
        (("/p/a.py", (("lines", "1-9"),)),)
    )
    assert shell.use({"cmd": "sed -i s/a/b/ a.py"}) == FileUse(edits=("a.py",))
    assert shell.use({"cmd": 42}) == shell.use("not a mapping") == FileUse()
    assert shell.path({"cmd": "cat a.py b.py"}) == "a.py, b.py"
    assert shell.said_arguments == ("cmd", "workdir")
    patch = FileAccess("patch", patch_arguments=("input",))
    text = "*** Begin Patch\n*** Add File: n.py\n+x\n*** End Patch"
    assert patch.use(text) == patch.use({"input": text}) == FileUse(writes=("n.py",))


def test_the_built_in_plugin_declares_the_agents_file_tools() -> None:
    host = PluginHost.create(load_entrypoints=False)
    problems: list[middleware.ProblemReport] = []
    expected = {
        "Read": "read", "read": "read", "read_file": "read", "read_many_files": "read",
        "Write": "write", "write": "write", "write_file": "write",
        "Edit": "edit", "MultiEdit": "edit", "edit": "edit", "replace": "edit",
        "apply_patch": "patch", "exec_command": "shell", "shell": "shell",
        "shell_command": "shell", "local_shell": "shell", "Bash": "shell",
        "PowerShell": "shell", "bash": "shell", "run_shell_command": "shell",
        "swe_agent_action": "shell", "Grep": None, "write_stdin": None,
    }  # fmt: skip
    declared = {name: host.tool_file_access(name, problems) for name in expected}
    assert {name: (a.action if a else None) for name, a in declared.items()} == expected
    shells = {
        name: (a.command_arguments, a.workdir_arguments, a.dialect)
        for name, a in declared.items()
        if a is not None and a.action == "shell"
    }
    assert shells == {
        "exec_command": (("cmd",), ("workdir",), "sh"),
        "shell": (("command",), ("workdir",), "sh"),
        "shell_command": (("command",), ("workdir",), "sh"),
        "local_shell": (("command",), ("working_directory",), "sh"),
        "Bash": (("command",), (), "sh"),
        "PowerShell": (("command",), (), "powershell"),
        "bash": (("command",), ("workdir",), "sh"),
        "run_shell_command": (("command",), ("directory",), "sh"),
        "swe_agent_action": (("command",), (), "sh"),
    }
    caps = {name: host.tool_result_cap(name, problems) for name in ("Read", "read_file", "read")}
    assert {name: cap.cap.max_chars for name, cap in caps.items() if cap} == {
        "Read": 100_000,
        "read_file": 100_000,
        "read": 80_000,
    }
    assert not problems


@settings(max_examples=60)
@given(
    st.lists(st.sampled_from(["read", "bash", "reread", "write", "other"]), min_size=3, max_size=16)
)
def test_reads_are_released_alike_on_every_request_and_processing_again_changes_nothing(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str]
) -> None:
    """Request by request, as a session sends them: the bytes of each request's output
    up to its last turns are the previous request's output (releases read only the history
    before the boundary), and processing an output again changes nothing."""
    make = {
        "read": read,
        "reread": read,
        "bash": bash,
        "write": lambda i: turn(i, "Write", {"file_path": "/repo/app.py", "content": "x"}, "ok"),
        "other": lambda i: read(i, path=f"/repo/m{i}.py"),
    }
    turns = [make[kind](i) for i, kind in enumerate(kinds)]
    root = tmp_path_factory.mktemp("rel")
    path = policy(root, schedule={"step_turns": 3, "rewrite_cost": 0})
    with middleware.Pipeline.from_policy(path, session_id="hy") as pipe:
        sent = []
        for k in range(1, len(turns) + 1):
            out = pipe.process(history(*turns[:k]), format="anthropic").messages
            again = pipe.process(out, format="anthropic").messages
            assert again == out
            sent.append(out)
    with middleware.Pipeline.from_policy(path, session_id="hy") as fresh:
        alone = fresh.process(history(*turns), format="anthropic").messages
    assert results(alone) == results(sent[-1])
