"""The headline figures of docs/benchmarks.md and docs/presets.md, as one command prints them.

Every recorded session of ../shared/data/trajectories (the development set: Claude Code
with its subagents, the newer Claude Code sessions of claude-code-more, the Codex CLI
rollouts, mini-swe-agent, SWE-agent, tau-bench) replayed by ``chatcli-mw
simulate`` under the default policy, ``preset:lean`` (the default before file reads were
kept), Anthropic's ``clear_tool_uses`` with its defaults and ``preset:claude-code``, and
printed as one Markdown table: cost and effective cost relative to no middleware, the
share of the lines the agent later copies into a tool call that the policy hid, the edits
that must read their file again, and the sessions whose effective cost is over no
middleware's. tests/test_headline.py checks that the docs hold this table, when the data
is there. The previews name the folder the replay spills to, under the system's temporary
folder, so the figures depend a little on its path: the docs give them for /tmp.

    python benchmarks/headline.py [--data DIR] [--jobs N]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import NamedTuple

from middleware.replay.costs import PRICING
from middleware.replay.simulate import PolicySpec, simulate
from middleware.replay.summaries import PolicySummary
from middleware.replay.transcripts import load_transcripts

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"
REPO = Path(__file__).resolve().parents[1]

#: Each source: its name in the table and the files of the development set.
SOURCES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Claude Code", ("claude-code/*.jsonl", "claude-code/*/subagents/*.jsonl")),
    ("Claude Code, more", ("claude-code-more/*.jsonl",)),
    ("Codex CLI", ("codex/*.jsonl",)),
    ("mini-swe-agent", ("mini-swe-agent/trajs/*/*.traj.json",)),
    ("SWE-agent", ("swe-agent/**/*.traj",)),
    ("tau-bench", ("tau-bench/*.json",)),
)
POLICIES = (
    PolicySpec("default", None),
    PolicySpec("preset:lean", "preset:lean"),
    PolicySpec("anthropic-clear-tool-uses",
               str(REPO / "policies" / "baselines" / "anthropic-clear-tool-uses.yaml")),
    PolicySpec("preset:claude-code", "preset:claude-code"),
)  # fmt: skip
#: A session is over no middleware's cost when its effective cost is above this (the
#: figures are rounded to four places).
OVER = 1.0005


class Row(NamedTuple):
    source: str
    sessions: int
    requests: int
    summary: PolicySummary


#: The sources whose replay takes minutes (thousands of requests): the suite checks their
#: default row only (tests/test_headline.py), the command prints every row.
LONG_SOURCES = frozenset({"Claude Code, more", "Codex CLI"})


def measure(
    source: str, files: Sequence[Path], policies: Sequence[PolicySpec] = POLICIES
) -> list[Row]:
    """Each of ``policies`` on one source's sessions (a process of its own)."""
    transcripts = [t for f in files for t in load_transcripts(f)]
    summaries = simulate(transcripts, policies, PRICING["anthropic-5m"], window=200_000)
    return [Row(source, len(transcripts), s.requests, s) for s in summaries[1:]]


def table(rows: Sequence[Row]) -> str:
    """The Markdown table of ``rows``."""
    lines = [
        "| source (sessions, requests) | policy | cost | effective | quotes hidden "
        "| forced re-reads | sessions over raw |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    shown = ""
    for row in rows:
        s = row.summary
        source = f"{row.source} ({row.sessions}, {row.requests:,})"
        quotes = (
            f"{s.quotes_hidden} of {s.quotes} ({s.quotes_hidden_rate:.1%})" if s.quotes else "–"
        )
        over = sum(
            figures.to_dict()["relative_effective_cost"] > OVER for figures in s.sessions.values()
        )
        lines.append(
            f"| {source if source != shown else ''} | {s.name} | {s.relative_cost:.3f} "
            f"| {s.relative_effective_cost:.3f} | {quotes} | {sum(s.rereads.values())} | {over} |"
        )
        shown = source
    return "\n".join(lines)


def headline(data: Path, jobs: int) -> str:
    """The table for the sessions under ``data``, the sources measured in ``jobs``
    processes side by side."""
    sources = [
        (name, sorted(p for pattern in patterns for p in data.glob(pattern)))
        for name, patterns in SOURCES
    ]
    # Fresh processes (spawn), not forks of this one: a fork of a process with threads
    # running (a test runner's) may inherit a lock held forever.
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(jobs, 1), mp_context=spawn) as pool:
        measured = list(pool.map(measure, *zip(*sources, strict=True)))
    return table([row for rows in measured for row in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"skipped: no trajectories at {args.data}")
        return 0
    print(headline(args.data, args.jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
