"""Every test has a temporary folder of its own as the system's (tests/conftest.py), so
tests that use one session id on the default spill folder never meet each other's files,
whether they run one after the other in a worker or side by side in two (issue 37, item 4:
fixed session ids on the shared default folder collided)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from locations import EXAMPLES


@pytest.mark.parametrize("run", ["first", "second"])
def test_a_fixed_session_id_on_the_default_spill_folder_starts_empty(run: str) -> None:
    """The command keeps what it spilled (for the agent to read back), so without a folder
    of its own the second run would find the first's."""
    folder = Path(tempfile.gettempdir()) / "chatcli-agent-fixed"
    assert not folder.exists(), f"the {run} run found another test's spill folder"
    example = str(EXAMPLES / "anthropic-interrupted.json")
    command = [sys.executable, "-m", "middleware", "process", example, "--session", "fixed"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    assert f"full outputs kept in: {folder / 'tool-results'}" in done.stderr
    assert list((folder / "tool-results").iterdir())
