"""The headline tables of docs/benchmarks.md and docs/presets.md are what
``benchmarks/headline.py`` prints on the development sessions (when ../shared/data is there
to replay): a figure in the docs cannot drift from the code."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
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


HEADLINE = headline_module()
#: The system's temporary folder, as the command finds it (read before any test gives
#: itself one of its own): previews name the spill folder the replay writes under it, so
#: the figures depend on its length, and the docs give them for /tmp.
SYSTEM_TEMPORARY = tempfile.gettempdir()


@pytest.fixture
def system_temporary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", SYSTEM_TEMPORARY)


@pytest.mark.slow
@pytest.mark.parametrize("source", [name for name, _ in HEADLINE.SOURCES])
@pytest.mark.usefixtures("system_temporary")
def test_the_docs_hold_the_headline_rows_the_command_prints(source: str) -> None:
    """One source's rows at a time, measured here as the command measures each in a process
    of its own, so the suite's workers share the sources out (the command's whole output is
    its header and these rows: the next test)."""
    if not HEADLINE.DEFAULT_DATA.is_dir():
        pytest.skip(f"no trajectories at {HEADLINE.DEFAULT_DATA}")
    patterns = dict(HEADLINE.SOURCES)[source]
    files = sorted(p for pattern in patterns for p in HEADLINE.DEFAULT_DATA.glob(pattern))
    # A long source's default row only: its every row would take minutes of the suite.
    policies = HEADLINE.POLICIES[:1] if source in HEADLINE.LONG_SOURCES else HEADLINE.POLICIES
    printed = HEADLINE.table(HEADLINE.measure(source, files, policies)).splitlines()[2:]
    for doc in DOCS:
        lines = documented(doc)
        at = next((i for i, line in enumerate(lines) if line.startswith(f"| {source} (")), None)
        assert at is not None, f"{doc.name}'s headline has no row for {source}"
        assert lines[at : at + len(printed)] == printed, (
            f"{doc.name}'s headline is stale: paste `python benchmarks/headline.py` into it"
        )


def test_the_docs_hold_the_whole_table_in_the_commands_order() -> None:
    """The docs' blocks are exactly the command's header and, source by source in its
    order, a row per policy: with the test above, the table the command prints."""
    for doc in DOCS:
        lines = documented(doc)
        assert lines[:2] == HEADLINE.table([]).splitlines(), f"{doc.name}: header"
        sources = [line.split(" (")[0][2:] for line in lines[2:] if not line.startswith("|  |")]
        assert sources == [name for name, _ in HEADLINE.SOURCES], doc.name
        assert len(lines) == 2 + len(sources) * len(HEADLINE.POLICIES), doc.name


def documented(doc: Path) -> list[str]:
    found = BLOCK.search(doc.read_text("utf-8"))
    assert found is not None, f"{doc.name} has no headline block"
    return found.group(1).strip().splitlines()


def test_a_row_gives_each_figure_and_counts_the_sessions_over_raw() -> None:
    from middleware.replay.summaries import PolicySummary, SessionFigures

    headline = HEADLINE
    summary = PolicySummary(
        "default",
        requests=1234,
        cost=70.0,
        raw_cost=100.0,
        readback_cost=4.0,
        quotes=200,
        quotes_hidden=30,
        rereads={"Read": 3, "Bash": 1},
    )
    summary.sessions = {
        "a": SessionFigures(cost=99.0, raw_cost=100.0, readback_cost=2.0),  # 1.01: over
        "b": SessionFigures(cost=100.0, raw_cost=100.0),  # at raw: not over
    }
    tau = PolicySummary("lean", cost=99.0, raw_cost=100.0)
    rows = [
        headline.Row("Claude Code", 12, 1234, summary),
        headline.Row("Claude Code", 12, 1234, tau),
    ]
    lines = headline.table(rows).splitlines()
    assert lines[0].startswith("| source (sessions, requests) | policy | cost | effective |")
    assert (
        lines[2]
        == "| Claude Code (12, 1,234) | default | 0.700 | 0.740 | 30 of 200 (15.0%) | 4 | 1 |"
    )
    assert lines[3] == "|  | lean | 0.990 | 0.990 | – | 0 | 0 |"  # the source said once


@pytest.mark.slow
def test_the_command_prints_the_header_and_each_sources_rows_in_order(tmp_path: Path) -> None:
    """The command itself, measuring in processes side by side, on a folder laid out as the
    shared data is with the smallest session file of each source (tau-bench's one file cut
    to its first two sessions)."""
    if not HEADLINE.DEFAULT_DATA.is_dir():
        pytest.skip(f"no trajectories at {HEADLINE.DEFAULT_DATA}")
    expected = HEADLINE.table([]).splitlines()
    for source, patterns in HEADLINE.SOURCES:
        found = [p for pattern in patterns for p in HEADLINE.DEFAULT_DATA.glob(pattern)]
        smallest = min(found, key=lambda path: (path.stat().st_size, path))
        copy = tmp_path / smallest.relative_to(HEADLINE.DEFAULT_DATA)
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source == "tau-bench":
            sessions = json.loads(smallest.read_text("utf-8"))
            copy.write_text(json.dumps(sessions[:2]), "utf-8")
        else:
            copy.symlink_to(smallest)
        expected += HEADLINE.table(HEADLINE.measure(source, [copy])).splitlines()[2:]
    run = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "headline.py"), "--data", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    assert run.stdout.splitlines() == expected
