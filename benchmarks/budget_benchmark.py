"""Budget enforcement on the real sessions of ../shared/data/trajectories.

Replays every request of every transcript through the default policy and reports, per
source: how many distinct tool results each cap caught, the characters moved to disk, and
the time per request (``process()``) beside the time of ``json.loads(json.dumps(...))`` of
the same request, the parse any proxy pays anyway.

    python benchmarks/budget_benchmark.py [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import middleware
from middleware.replay.transcripts import Transcript, load_transcripts

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"


def transcript_files(data: Path) -> list[Path]:
    patterns = ("claude-code/**/*.jsonl", "mini-swe-agent/**/*.traj.json", "swe-agent/**/*.traj",
                "tau-bench/*.json")  # fmt: skip
    return sorted(p for pattern in patterns for p in data.glob(pattern))


def cap_family(source: str) -> str:
    """Group cap sources for the table: policy override, plugin, per-result, turn."""
    if source.startswith("policy"):
        return "policy tools.*"
    if source.startswith("plugin"):
        return "plugin cap"
    if "even_split" in source:
        return "even split"
    return "per-result cap"


@dataclass
class Tally:
    """What one source's transcripts added up to."""

    requests: int = 0
    results: int = 0
    caught: Counter[str] = field(default_factory=Counter)
    moved: int = 0
    timings: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"skipped: no trajectories at {args.data}")
        return 0

    tallies: dict[str, Tally] = defaultdict(Tally)
    with tempfile.TemporaryDirectory() as spill_root:
        for file in transcript_files(args.data):
            for transcript in load_transcripts(file):
                replay(transcript, spill_root, tallies[transcript.source])

    print(f"{'source':15} {'requests':>8} {'results':>8} {'per-result':>10} {'plugin':>7} "
          f"{'turn':>6} {'chars to disk':>14} {'process ms p50/p95':>19} {'json ms p50':>11} "
          f"{'ratio':>6}")  # fmt: skip
    for source, tally in sorted(tallies.items()):
        t, b = tally.timings, tally.baseline
        p50, p95 = statistics.median(t) * 1e3, statistics.quantiles(t, n=20)[-1] * 1e3
        print(
            f"{source:15} {tally.requests:8d} {tally.results:8d} "
            f"{tally.caught['per-result cap']:10d} {tally.caught['plugin cap']:7d} "
            f"{tally.caught['turn budget']:6d} {tally.moved:14,d} "
            f"{p50:9.2f}/{p95:8.2f} {statistics.median(b) * 1e3:11.2f} {sum(t) / sum(b):6.1f}x"
        )
    print("ratio: total process() time / total json.loads(json.dumps(request)) time")
    return 0


def replay(transcript: Transcript, spill_root: str, tally: Tally) -> None:
    policy = middleware.load_policy(
        None, env={}, dotenv_path=False,
        overrides={**transcript.policy_overrides, "spill.root": spill_root},
    )  # fmt: skip
    seen: set[tuple[str, int | None]] = set()
    last_count = 0
    with middleware.Pipeline.from_policy(policy) as pipe:
        for request in transcript.requests():
            start = time.perf_counter()
            json.loads(json.dumps(request))
            middle = time.perf_counter()
            report = pipe.process(request, format=transcript.format).report
            end = time.perf_counter()
            tally.baseline.append(middle - start)
            tally.timings.append(end - middle)
            tally.requests += 1
            last_count = report.tool_results
            for action in report.by_step("budget"):
                key = (action.tool_call_id, action.message_index)
                if action.kind != "spilled" or key in seen:
                    continue
                seen.add(key)
                family = ("turn budget" if action.detail["reason"] == "turn_budget"
                          else cap_family(action.detail["cap_source"]))  # fmt: skip
                tally.caught[family] += 1
                tally.moved += action.chars_before - action.chars_after
    tally.results += last_count


if __name__ == "__main__":
    sys.exit(main())
