"""How long ``process()`` takes on the largest real requests, beside the JSON round-trip any
proxy pays anyway, and how long replaying whole sessions takes.

    python benchmarks/speed_benchmark.py [--data DIR] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import middleware
from middleware.replay.transcripts import Transcript, load_transcripts

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"


def best_of(repeat: int, action: object) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"skipped: no trajectories at {args.data}")
        return 0
    files = [
        *args.data.glob("claude-code/*.jsonl"),
        *args.data.glob("mini-swe-agent/**/*.traj.json"),
    ]
    transcripts = [t for f in sorted(files) for t in load_transcripts(f)]
    largest = sorted(transcripts, key=lambda t: -len(json.dumps(t.messages)))[:5]

    print(f"{'largest request':45} {'chars':>10} {'json ms':>9} {'process ms':>11} {'ratio':>6}")
    for t in largest:
        request = max(t.requests(), key=len)
        chars = len(json.dumps(request))
        with _pipeline(t) as pipe:
            base = best_of(args.repeat, lambda r=request: json.loads(json.dumps(r)))
            took = best_of(
                args.repeat, lambda r=request, p=pipe, f=t.format: p.process(r, format=f)
            )
        print(f"{t.name[:45]:45} {chars:>10,} {base * 1e3:>9.2f} {took * 1e3:>11.2f} "
              f"{took / base:>5.1f}x")  # fmt: skip

    print(f"\n{'whole session':45} {'requests':>8} {'json s':>8} {'replay s':>9} {'ratio':>6}")
    for t in largest:
        requests = list(t.requests())
        with _pipeline(t) as pipe:
            start = time.perf_counter()
            for r in requests:
                json.loads(json.dumps(r))
            base = time.perf_counter() - start
            start = time.perf_counter()
            per_request = []
            for r in requests:
                one = time.perf_counter()
                pipe.process(r, format=t.format)
                per_request.append(time.perf_counter() - one)
            took = time.perf_counter() - start
        print(f"{t.name[:45]:45} {len(requests):>8} {base:>8.2f} {took:>9.2f} {took / base:>5.1f}x"
              f"   (median {statistics.median(per_request) * 1e3:.1f} ms per request)")  # fmt: skip
    return 0


def _pipeline(t: Transcript) -> middleware.Pipeline:
    policy = middleware.load_policy(None, env={}, dotenv_path=False, overrides=t.policy_overrides)
    return middleware.Pipeline.from_policy(policy, session_id="speed")


if __name__ == "__main__":
    sys.exit(main())
