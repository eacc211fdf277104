"""The headline tables of docs/benchmarks.md and docs/presets.md are what
``benchmarks/headline.py`` prints on the development sessions (when ../shared/data is there
to replay): a figure in the docs cannot drift from the code."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from types import ModuleType

import pytest
from locations import REPO

DOCS = (REPO / "docs" / "benchmarks.md", REPO / "docs" / "presets.md")
BLOCK = re.compile(r"<!-- headline: [^\n]*-->\n(.*?)<!-- /headline -->", re.DOTALL)


def headline_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("headline", REPO / "benchmarks" / "headline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_hold_the_headline_table_the_command_prints() -> None:
    headline = headline_module()
    if not headline.DEFAULT_DATA.is_dir():
        pytest.skip(f"no trajectories at {headline.DEFAULT_DATA}")
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "headline.py")],
                         capture_output=True, text=True, timeout=1800, check=True)  # fmt: skip
    printed = run.stdout.strip()
    for doc in DOCS:
        found = BLOCK.search(doc.read_text("utf-8"))
        assert found is not None, f"{doc.name} has no headline block"
        assert found.group(1).strip() == printed, (
            f"{doc.name}'s headline is stale: paste `python benchmarks/headline.py` into it"
        )


def test_a_row_gives_each_figure_and_counts_the_sessions_over_raw() -> None:
    from middleware.replay.simulate import PolicySummary, SessionFigures

    headline = headline_module()
    summary = PolicySummary("default", requests=1234, cost=70.0, raw_cost=100.0,
                            readback_cost=4.0, quotes=200, quotes_hidden=30,
                            rereads={"Read": 3, "Bash": 1})  # fmt: skip
    summary.sessions = {
        "a": SessionFigures(cost=99.0, raw_cost=100.0, readback_cost=2.0),  # 1.01: over
        "b": SessionFigures(cost=100.0, raw_cost=100.0),  # at raw: not over
    }
    tau = PolicySummary("lean", cost=99.0, raw_cost=100.0)
    rows = [headline.Row("Claude Code", 12, 1234, summary),
            headline.Row("Claude Code", 12, 1234, tau)]  # fmt: skip
    lines = headline.table(rows).splitlines()
    assert lines[0].startswith("| source (sessions, requests) | policy | cost | effective |")
    assert (
        lines[2]
        == "| Claude Code (12, 1,234) | default | 0.700 | 0.740 | 30 of 200 (15.0%) | 4 | 1 |"
    )
    assert lines[3] == "|  | lean | 0.990 | 0.990 | – | 0 | 0 |"  # the source said once
