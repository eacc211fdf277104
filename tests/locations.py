"""Where the tests find the project's files and the shared data beside the checkout."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
TRAJECTORIES = REPO.parent / "shared" / "data" / "trajectories"
