"""What each policy costs on the real sessions of ../shared/data/trajectories.

Replays every request of every transcript, per source, under the default policy and the
shipped baselines, charged with prompt caching (Anthropic 5-minute prices by default), and
prints for each: cost relative to no middleware, cache-hit ratio, peak request, requests over
the window, characters spilled and compacted, whether the last two turns' results reached the
model uncompacted, and hidden references.

    python benchmarks/cost_benchmark.py [--data DIR] [--pricing NAME] [--policy FILE]...
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from middleware.cli.simulate import policy_specs
from middleware.cli.simulate_views import render_table
from middleware.replay.costs import PRICING
from middleware.replay.simulate import simulate
from middleware.replay.transcripts import load_transcripts

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"
SOURCES = {
    "claude-code": ("claude-code/*.jsonl",),
    "mini-swe-agent": ("mini-swe-agent/**/*.traj.json",),
    "swe-agent": ("swe-agent/**/*.traj",),
    "tau-bench": ("tau-bench/*.json",),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--pricing", choices=sorted(PRICING), default="anthropic-5m")
    parser.add_argument("--window", type=int, default=200_000)
    parser.add_argument("--policy", action="append", default=[], metavar="[NAME=]FILE")
    parser.add_argument(
        "--presets",
        action="store_true",
        help="compare the default with the seed-system presets instead of the baselines",
    )
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"skipped: no trajectories at {args.data}")
        return 0
    specs = policy_specs(args.policy, baselines=not args.presets, presets=args.presets)
    for source, patterns in SOURCES.items():
        files = sorted(p for pattern in patterns for p in args.data.glob(pattern))
        transcripts = [t for f in files for t in load_transcripts(f)]
        if not transcripts:
            continue
        start = time.perf_counter()
        summaries = simulate(transcripts, specs, PRICING[args.pricing], window=args.window)
        print(f"== {source} ({time.perf_counter() - start:.0f} s)")
        print(render_table(summaries, len(transcripts), args.pricing, args.window, []))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
