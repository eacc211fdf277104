"""Bad input gets one line and exit 2, never a traceback; outputs are written atomically
and the input is never truncated (issue 13, item 11)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from middleware.cli import app

SCRIPT = Path(sys.executable).parent / "chatcli-mw"
HISTORY = [
    {"role": "user", "content": "List files."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
]  # fmt: skip


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
        timeout=120,
    )


BAD: dict[str, bytes] = {
    "invalid UTF-8": b'[{"role": "user", "content": "caf\xe9"}]',
    "invalid UTF-16": b"\xff\xfe[\x00{\x00\x00\xd8",
    "10,000 levels of nesting": b"[" * 10_000 + b"]" * 10_000,
    "a 5,000-digit integer": b'[{"role": "user", "content": "x", "n": ' + b"7" * 5_000 + b"}]",
    "NaN": b'[{"role": "user", "content": "x", "n": NaN}]',
    # valid JSON, but no provider accepts an unpaired surrogate: a clear error, not a crash
    "a lone surrogate": b'[{"role": "user", "content": "bad \\udfff half"}]',
    "a list as role": b'[{"role": ["user"], "content": "x"}]',
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_unreadable_input_is_one_line_and_exit_2(tmp_path: Path, name: str) -> None:
    path = tmp_path / "in.json"
    path.write_bytes(BAD[name])
    for command in ("process", "check"):
        done = run(command, str(path))
        assert done.returncode == 2, (command, done.stderr)
        assert "Traceback" not in done.stderr
        assert done.stderr.startswith(f"chatcli-mw: error: {path}: ")
        assert done.stderr.count("\n") == 1
    assert path.read_bytes() == BAD[name]


def test_output_over_the_input_on_bad_input_leaves_the_input_whole(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(BAD["invalid UTF-8"])
    assert run("process", str(path), "-o", str(path)).returncode == 2
    assert path.read_bytes() == BAD["invalid UTF-8"]


def test_output_over_the_input_works(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps(HISTORY), encoding="utf-8")
    assert run("process", str(path), "-o", str(path)).returncode == 0
    assert len(json.loads(path.read_text(encoding="utf-8"))) == 3


def test_a_failed_write_leaves_the_old_output_and_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.json"
    source.write_text(json.dumps(HISTORY), encoding="utf-8")
    out = tmp_path / "out.json"
    out.write_text("previous output", encoding="utf-8")
    real_write = os.write

    def disk_full(fd: int, data: bytes) -> int:
        if len(data) > 100:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", disk_full)
    assert app.main(["process", str(source), "-o", str(out), "--session", "t"]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "previous output"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json", "out.json"]


def test_a_closed_pipe_on_stdout_is_not_a_traceback(tmp_path: Path) -> None:
    big = tmp_path / "big.json"  # more output than a pipe holds, so the writer meets EPIPE
    big.write_text(json.dumps([{"role": "user", "content": "line\n" * 100_000}]), "utf-8")
    with subprocess.Popen(
        [str(SCRIPT), "process", str(big)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin"},
    ) as command:
        assert command.stdout is not None and command.stderr is not None
        command.stdout.readline()
        command.stdout.close()  # as `chatcli-mw process big.json | head -1` does
        stderr = command.stderr.read().decode()
        assert command.wait(timeout=60) in (0, 141), stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr
