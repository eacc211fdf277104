"""Bounds on what a policy input may cost (issue #13, item 15): alias bombs, huge and endless
files, deep nesting and ``.env`` expansion bombs end in a short ``PolicyError``.

Inputs that used to hang or exhaust memory are loaded in a child process with a memory cap
and a generous timeout, so a regression fails the test instead of hanging CI or the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from middleware import PolicyError, load_policy, validate_policy_file
from middleware.policy.limits import MAX_DEPTH, MAX_EXTENDS, MAX_FILE_BYTES, MAX_NODES

#: What the child process may allocate (address space) before it fails with MemoryError.
CHILD_MEMORY = 2 << 30

CHILD = textwrap.dedent(
    """
    import json, sys
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))
    except (ImportError, ValueError, OSError):
        pass
    from middleware import PolicyError, load_policy, validate_policy_file
    call, path, dotenv = sys.argv[1], sys.argv[2], sys.argv[3] or False
    try:
        if call == "load":
            load_policy(path, env={{}}, dotenv_path=dotenv)
            out = {{"outcome": "ok", "messages": []}}
        else:
            errors = validate_policy_file(path)
            out = {{"outcome": "PolicyError" if errors else "ok",
                    "messages": [str(e) for e in errors]}}
    except PolicyError as exc:
        out = {{"outcome": "PolicyError", "messages": [str(exc)]}}
    except BaseException as exc:
        out = {{"outcome": type(exc).__name__, "messages": [str(exc)[:500]]}}
    print(json.dumps(out))
    """
).format(memory=CHILD_MEMORY)


def guarded(call: str, path: Path | str, dotenv: Path | None = None) -> dict[str, Any]:
    """``load_policy(path)`` or ``validate_policy_file(path)`` in a child process with a
    memory cap and a 60 s timeout: what it raised and the messages."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, call, str(path), str(dotenv or "")],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{call} {path} did not finish within 60 s")
    if not proc.stdout.strip():
        pytest.fail(f"the child process died (status {proc.returncode}): {proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def alias_bomb(levels: int) -> str:
    """The classic "billion laughs": each level is ten aliases of the level below."""
    lines = ["version: 1", "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("call", ["load", "validate"])
@pytest.mark.parametrize("levels", [6, 7])
def test_an_alias_bomb_fails_fast_with_a_short_message(
    tmp_path: Path, levels: int, call: str
) -> None:
    path = write(tmp_path, "bomb.yaml", alias_bomb(levels))
    assert len(path.read_bytes()) < 500
    result = guarded(call, path)
    assert result["outcome"] == "PolicyError", result
    (message,) = result["messages"]
    assert len(message) < 300
    assert message.startswith(f"{path}:")
    assert f"{MAX_NODES:,}" in message


def test_an_alias_bomb_is_counted_where_it_expands(tmp_path: Path) -> None:
    path = write(tmp_path, "bomb.yaml", alias_bomb(4))
    with pytest.raises(PolicyError) as info:
        load_policy(path, env={}, dotenv_path=False)
    # a3 (line 5) expands to 11,111 nodes, the first past the bound: it is the one named.
    assert info.value.line == 5
    assert "alias" in info.value.detail


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX device files and FIFOs")
@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "folder"])
@pytest.mark.parametrize("how", ["extends", "path", "dotenv"])
def test_only_regular_files_are_read(tmp_path: Path, target: str, how: str) -> None:
    if target == "fifo":
        os.mkfifo(tmp_path / "fifo")
    elif target == "folder":
        (tmp_path / "folder").mkdir()
    bad = target if target.startswith("/") else str(tmp_path / target)
    policy = write(tmp_path, "p.yaml", "version: 1\n")
    if how == "extends":
        result = guarded("load", write(tmp_path, "child.yaml", f"version: 1\nextends: {bad}\n"))
    elif how == "path":
        result = guarded("load", bad)
    else:
        result = guarded("load", policy, dotenv=Path(bad))
    assert result["outcome"] == "PolicyError", result
    (message,) = result["messages"]
    assert message.startswith(f"{bad}: ")
    assert "not a regular file" in message


def test_an_oversized_policy_is_refused_with_the_bound_named(tmp_path: Path) -> None:
    path = write(tmp_path, "big.yaml", "version: 1\ndescription: " + "x" * MAX_FILE_BYTES + "\n")
    with pytest.raises(PolicyError) as info:
        load_policy(path, env={}, dotenv_path=False)
    assert str(info.value).startswith(f"{path}: ")
    assert "1 MiB" in str(info.value)
    (error,) = validate_policy_file(path)
    assert "1 MiB" in str(error)
    # Just under the bound is fine.
    path.write_text("version: 1\ndescription: " + "x" * (MAX_FILE_BYTES - 30) + "\n")
    assert load_policy(path, env={}, dotenv_path=False).get("description")


def test_a_50_megabyte_policy_is_refused_quickly(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("w", encoding="utf-8") as out:
        out.write("version: 1\ntools:\n")
        chunk = "".join(f"  t{i}: {{max_chars: {1000 + i}}}\n" for i in range(20_000))
        while out.tell() < 50 << 20:
            out.write(chunk)
    for call in ("load", "validate"):
        result = guarded(call, path)
        assert result["outcome"] == "PolicyError", result
        assert "1 MiB" in result["messages"][0]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("version: 1\nname: " + "[" * 5000 + "]" * 5000 + "\n", 2),
        ("version: 1\ntools:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 60)), 2),
    ],
    ids=["flow", "block"],
)
def test_deep_nesting_is_refused(tmp_path: Path, text: str, line: int) -> None:
    path = write(tmp_path, "deep.yaml", text)
    with pytest.raises(PolicyError) as info:
        load_policy(path, env={}, dotenv_path=False)
    assert f"{MAX_DEPTH} levels" in str(info.value)
    assert info.value.line is not None and info.value.line >= line


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "loop.yaml", "version: 1\ntools: &t\n  x: *t\n")
    with pytest.raises(PolicyError, match="refers to itself") as info:
        load_policy(path, env={}, dotenv_path=False)
    assert info.value.line == 3


def test_an_extends_chain_is_bounded(tmp_path: Path) -> None:
    for i in range(MAX_EXTENDS + 5):
        write(tmp_path, f"p{i}.yaml", f"version: 1\nextends: p{i + 1}.yaml\n")
    write(tmp_path, f"p{MAX_EXTENDS + 5}.yaml", "version: 1\n")
    with pytest.raises(PolicyError, match=f"more than {MAX_EXTENDS} files"):
        load_policy(tmp_path / "p0.yaml", env={}, dotenv_path=False)
    assert load_policy(tmp_path / "p10.yaml", env={}, dotenv_path=False)


def test_a_dotenv_expansion_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["BOMB0=" + "x" * 100]
    lines += [f"BOMB{i}=${{BOMB{i - 1}}}${{BOMB{i - 1}}}" for i in range(1, 40)]
    lines.append("CHATCLI_POLICY_NAME_UNUSED=${BOMB39}")
    dotenv = write(tmp_path, ".env", "\n".join(lines) + "\n")
    policy = write(tmp_path, "p.yaml", "version: 1\n")
    result = guarded("load", policy, dotenv=dotenv)
    assert result["outcome"] == "PolicyError", result
    (message,) = result["messages"]
    assert message.startswith(f"{dotenv}: ")
    assert "1 MiB" in message


def test_dotenv_expansion_still_works(tmp_path: Path) -> None:
    dotenv = write(tmp_path, ".env", "CAP=30000\nCHATCLI_BUDGET__MAX_RESULT_CHARS=${CAP}\n")
    policy = load_policy(None, env={}, dotenv_path=dotenv)
    assert policy.get("budget.max_result_chars") == 30_000


def test_the_largest_allowed_numbers_keep_the_budget_step_working() -> None:
    """Every number is at most 2**53, so products of settings stay finite: the budget step
    still cuts a large result instead of failing (and letting it through)."""
    import middleware

    overrides = {
        "budget.context_aware.enabled": True,
        "budget.context_aware.chars_per_token": float(2**53),
        "budget.context_aware.window_tokens": 2**53,
        "budget.context_aware.floor_tokens": 2**53,
    }
    policy = load_policy(None, env={}, dotenv_path=False, overrides=overrides)
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "x" * 1_000_000},
    ]  # fmt: skip
    with middleware.Pipeline.from_policy(policy) as pipe:
        result = pipe.process(messages)
    assert not result.report.problems
    assert len(result.messages[1]["content"]) < 100_000
