"""Session records locked by a stuck process delay the proxy's shutdown, and the end of a
session, by :data:`.RECORD_LOCK_SECONDS` in all, not that much per session (issue 43,
item 12): a real ``chatcli-mw serve``, its sessions' record locks held by this process
(another than the proxy's, as a process stopped while writing a record would hold them)."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from proxy_stack import serve_process_handle
from stand_in import Provider

from middleware.spill.layout import RECORD, session_folder_name
from middleware.spill.workspace import RECORD_LOCK, RECORD_LOCK_SECONDS

#: It times a real wait: in the suite's "timing" group (pyproject.toml's addopts).
pytestmark = [pytest.mark.xdist_group("timing"), pytest.mark.slow]

HEADERS = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
LOCKED = [f"locked-{n}" for n in range(5)]


def spilling_body(session: str) -> dict[str, Any]:
    """A request whose tool result is over the result cap: spilled, so the session has
    a folder, and a record to write when it closes."""
    call = {
        "type": "tool_use",
        "id": f"toolu_{session}",
        "name": "Bash",
        "input": {"command": "make"},
    }
    output = "\n".join(f"{session}: line {n} of the build, all fine" for n in range(2000))
    return {"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": "Build it."}, {"role": "assistant", "content": [call]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call["id"], "content": output}]},
    ]}  # fmt: skip


def send(url: str, session: str, path: str = "/v1/messages") -> None:
    headers = {**HEADERS, "x-chatcli-session": session}
    answer = httpx.post(url + path, json=spilling_body(session), headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text


@contextmanager
def held(root: Path, sessions: list[str]) -> Iterator[None]:
    """The record locks of ``sessions`` held here, as by a process that never lets go."""
    locks = []
    try:
        for session in sessions:
            path = root / session_folder_name(session) / RECORD_LOCK
            locks.append(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
            fcntl.flock(locks[-1], fcntl.LOCK_EX)
        yield
    finally:
        for lock in locks:
            os.close(lock)


def test_shutdown_with_five_sessions_locked_waits_for_them_once(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    """Each locked session waited for its lock in turn: 25.2 s to exit with five. Now
    they share one deadline; those still locked are named in the log, and a session
    whose lock is free past the deadline still has its record written."""
    root, log = tmp_path / "spill", tmp_path / "serve.log"
    with serve_process_handle(provider[1], {"spill.root": str(root)}, log=log) as (url, process):
        for session in [*LOCKED, "free"]:
            send(url, session)
        assert all((root / session_folder_name(s)).is_dir() for s in [*LOCKED, "free"])
        assert not (root / session_folder_name("free") / RECORD).exists()
        with held(root, LOCKED):
            started = time.monotonic()
            process.terminate()
            process.wait(timeout=120)
            took = time.monotonic() - started
    assert took < RECORD_LOCK_SECONDS + 7, f"{took:.1f} s to exit"  # generous: a loaded machine
    text = log.read_text(encoding="utf-8")
    unwritten = [line for line in text.splitlines() if "not kept" in line]
    assert all(any(session in line for line in unwritten) for session in LOCKED), text[-3000:]
    assert (root / session_folder_name("free") / RECORD).exists()  # nothing else lost
    folders = [root / session_folder_name(s) for s in [*LOCKED, "free"]]
    assert all(any(folder.glob("tool-results/*")) for folder in folders)  # the spilled outputs


def test_ending_a_session_served_under_three_policies_waits_for_its_lock_once(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    """``DELETE /sessions/{id}`` closes the session under every policy that served it,
    each waiting for the lock in turn (15 s for three); now once, within the deadline."""
    root = tmp_path / "spill"
    with serve_process_handle(provider[1], {"spill.root": str(root)}) as (url, _):
        for prefix in ("", "/policy/preset:lean", "/policy/preset:claude-code"):
            send(url, "ended", prefix + "/v1/messages")
        with held(root, ["ended"]):
            started = time.monotonic()
            answer = httpx.delete(url + "/sessions/ended", timeout=120)
            took = time.monotonic() - started
        assert answer.status_code == 200 and answer.json()["released"] == 3, answer.text
    assert took < RECORD_LOCK_SECONDS + 4, f"{took:.1f} s to end the session"
