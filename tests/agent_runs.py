"""One run of an agent CLI: its process (killed with everything it started), and the clean
environment it runs in."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Run:
    """One run of an agent CLI."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]
    process: subprocess.Popen[str] | None = None
    stdout: str = ""
    stderr: str = ""

    def start(self) -> Run:
        self.process = subprocess.Popen(
            self.argv,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        return self

    def wait(self, timeout: float = 300) -> Run:
        assert self.process is not None
        try:
            self.stdout, self.stderr = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        return self

    def kill(self) -> None:
        """Kill the agent and every process it started (a tool it is running)."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.stdout, self.stderr = self.process.communicate(timeout=60)

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.returncode

    def explain(self) -> str:
        argv = " ".join(self.argv)
        return f"{argv}\nexit {self.returncode}\n{self.stdout[-2000:]}\n{self.stderr[-3000:]}"


def wait_for_file(path: Path, seconds: float = 120) -> bool:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def base_env(home: Path) -> dict[str, str]:
    """A clean environment: its own HOME, this Python's folder first on PATH (the
    scripted commands run python3), no telemetry or update checks. Gemini CLI is not
    started twice: it starts itself again in a child process only to raise its heap limit
    (``GEMINI_CLI_NO_RELAUNCH``: a second of CPU per run)."""
    python = Path(shutil.which("python3") or "/usr/bin/python3").parent
    node = Path(shutil.which("node") or "/usr/bin/node").parent
    return {
        "PATH": f"{python}:{node}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "GEMINI_CLI_NO_RELAUNCH": "true",
    }
