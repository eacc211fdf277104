"""Where the tests find the project's files and the shared data beside the checkout."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
#: The tests and the builders they share (on sys.path under pytest: pyproject.toml).
TESTS = REPO / "tests"
TRAJECTORIES = REPO.parent / "shared" / "data" / "trajectories"
#: Requests the real agent CLIs sent to the provider stand-in (headers and bodies, long
#: texts trimmed), one file per agent and version.
RECORDED = TESTS / "recorded"
