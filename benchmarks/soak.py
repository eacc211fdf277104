"""The proxy as a long-lived service: 200 agents in growing conversations at once, some of
them slow to send and slow to read, while the object store they spill to hangs for a
minute mid-run. Every request must be answered (a 200) within its deadline, and the
proxy's memory must stay flat after the first minute (``tests/soak_stack.py`` does the work).

    python benchmarks/soak.py [--conversations 200] [--minutes 4] [--hang-at 1.5]
                              [--hang-for 1] [--slow 0.2] [--think 2 8]
                              [--large-every 10]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from soak_stack import Plan, soak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--minutes", type=float, default=4)
    parser.add_argument("--hang-at", type=float, default=1.5, help="minutes into the run")
    parser.add_argument("--hang-for", type=float, default=1, help="minutes")
    parser.add_argument("--slow", type=float, default=0.2, help="share of slow clients")
    parser.add_argument(
        "--think",
        type=float,
        nargs=2,
        default=(2.0, 8.0),
        help="seconds between an answer and the next request (min max)",
    )
    parser.add_argument(
        "--large-every",
        type=int,
        default=10,
        help="turns between two large (spilled) tool outputs; the others are ordinary",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a policy key of the proxy's, dotted (proxy.cleaning_bytes=8388608)",
    )
    args = parser.parse_args()
    overrides = tuple(tuple(item.split("=", 1)) for item in args.set)
    plan = Plan(args.conversations, args.minutes * 60, args.hang_at * 60, args.hang_for * 60,
                args.slow, overrides=overrides, think=tuple(args.think),
                large_every=args.large_every)  # fmt: skip
    outcome = soak(plan, echo=print)
    print("PASS" if outcome.passed else "FAIL")
    return 0 if outcome.passed else 1


if __name__ == "__main__":
    sys.exit(main())
