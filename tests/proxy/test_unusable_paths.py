"""The paths the proxy opens for writing are refused at start when they are not what they
must be (issue 43, item 9): a FIFO, a device or a folder as ``ledger.file`` (today a FIFO
hangs the start for ever, reading a device never ends, a folder is a traceback, and
/dev/null takes every answer and keeps none), a FIFO, a file or a device as
``spill.root`` (today every spill of every request fails). The error says which path and
what to set instead, and nothing is opened to find out (opening a FIFO waits for a
writer)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from servers import free_port

from middleware.errors import MiddlewareError
from middleware.proxy.build import build_proxy


def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "a.fifo"
    os.mkfifo(path, 0o600)
    return path


def folder(tmp_path: Path) -> Path:
    path = tmp_path / "a-folder"
    path.mkdir()
    return path


def regular(tmp_path: Path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("")
    return path


def null(tmp_path: Path) -> Path:
    return Path("/dev/null")


def zero(tmp_path: Path) -> Path:
    return Path("/dev/zero")


def started(overrides: dict[str, Any]) -> BaseException | None:
    """What building the proxy raised (``None``: nothing), within 10 s; a start still
    blocked then is let go (a writer opens the FIFO) and fails the test."""
    outcome: list[BaseException | None] = []

    def start() -> None:
        try:
            proxy, _ = build_proxy(None, overrides)
            proxy.close()
            outcome.append(None)
        except BaseException as exc:  # what the start raised is the result
            outcome.append(exc)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():
        for path in map(Path, overrides.values()):
            if path.is_fifo():
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"the proxy's start blocked on {overrides}")
    return outcome[0]


@pytest.mark.parametrize("made", [fifo, null, zero, folder], ids=["fifo", "null", "zero", "folder"])
def test_a_ledger_file_that_is_no_regular_file_is_refused_at_start(
    tmp_path: Path, made: Callable[[Path], Path]
) -> None:
    path = made(tmp_path)
    raised = started({"ledger.file": str(path), "spill.root": str(tmp_path / "spill")})
    assert isinstance(raised, MiddlewareError), raised
    message = str(raised)
    assert str(path) in message and "not a regular file" in message and "ledger.file" in message


@pytest.mark.parametrize("made", [fifo, null, regular], ids=["fifo", "null", "file"])
def test_a_spill_root_that_is_no_folder_is_refused_at_start(
    tmp_path: Path, made: Callable[[Path], Path]
) -> None:
    path = made(tmp_path)
    raised = started({"spill.root": str(path)})
    assert isinstance(raised, MiddlewareError), raised
    assert str(path) in str(raised) and "not a folder" in str(raised)


def test_a_ledger_file_and_a_spill_root_yet_to_be_made_are_fine(tmp_path: Path) -> None:
    link = tmp_path / "ledger-link.jsonl"
    link.symlink_to(tmp_path / "kept" / "ledger.jsonl")  # a link to where one will be
    for ledger in (tmp_path / "new" / "ledger.jsonl", link):
        assert started({"ledger.file": str(ledger), "spill.root": str(tmp_path / "s")}) is None


@pytest.mark.slow
def test_serve_with_a_fifo_as_its_ledger_file_exits_with_a_clear_error(tmp_path: Path) -> None:
    """``chatcli-mw serve`` says what is wrong in one line and exits 2 (today it hangs)."""
    path = fifo(tmp_path)
    env = {
        **os.environ,
        "CHATCLI_LEDGER__FILE": str(path),
        "CHATCLI_SPILL__ROOT": str(tmp_path / "spill"),
    }
    script = Path(sys.executable).parent / "chatcli-mw"
    try:
        done = subprocess.run(
            [str(script), "serve", "--port", str(free_port())],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("chatcli-mw serve hung on a FIFO as its ledger file")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("chatcli-mw: error:") and "FIFO" in done.stderr
    assert "Traceback" not in done.stderr
