"""How far the microcompaction schedule is from the best one possible (issue 17).

The schedule decides when the boundary moves (each move compacts a batch of results and
breaks the prompt cache after the first one). This script replays each session twice with
the same policy: once with the schedule, once with the cheapest boundary sequence a
schedule that knew the whole session in advance could choose (dynamic programming over
every non-decreasing sequence of boundaries, charged with the same cost model as
``chatcli-mw simulate``). What the oracle saves is the most any schedule could save with
the summaries and previews as they are; the rest of the distance to a cost target has to
come from what compaction keeps.

    python benchmarks/schedule_oracle.py [--data DIR] [--source claude-code] [--policy FILE]

Slow by design (every boundary of every request is processed): a few minutes for the
Claude Code sessions.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import middleware
from middleware.replay.costs import (
    PRICING,
    Pricing,
    RequestCost,
    chars_to_tokens,
    common_prefix_length,
    request_costs,
    serialize,
)
from middleware.replay.transcripts import Transcript, load_transcripts
from middleware.steps.microcompact import step

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"
PATTERNS = {
    "claude-code": "claude-code/**/*.jsonl",
    "mini-swe-agent": "mini-swe-agent/**/*.traj.json",
    "swe-agent": "swe-agent/**/*.traj",
    "tau-bench": "tau-bench/*.json",
}


@contextmanager
def forced_boundary() -> Iterator[list[int | None]]:
    """While active, the schedule's boundary is the list's value (``None``: the schedule's
    own), capped at the request's turn count."""
    value: list[int | None] = [None]
    scheduled = step._Compaction._boundary

    def boundary(self: Any, index: Any, sizes: list[int]) -> int:
        if value[0] is None:
            own: int = scheduled(self, index, sizes)
            return own
        return min(value[0], int(index.turn_count))

    with mock.patch.object(step._Compaction, "_boundary", boundary):
        yield value


class Request:
    """One processed request, as its messages' JSON texts (a cached prefix is measured
    message by message, then inside the first message that differs)."""

    def __init__(self, messages: list[Any]) -> None:
        self.parts = [json.dumps(m, ensure_ascii=False, separators=(",", ":")) for m in messages]
        self.chars = len(serialize(messages))

    def key(self) -> tuple[str, ...]:
        return tuple(self.parts)

    def shared(self, before: Request) -> int:
        """Characters of this request's text the previous one (``before``) shares."""
        count = 1  # "["
        for mine, theirs in zip(self.parts, before.parts, strict=False):
            if mine == theirs:
                count += len(mine) + 1
                continue
            return count + common_prefix_length(mine, theirs)
        return min(count, self.chars, before.chars)


def charge(pricing: Pricing, request: Request, before: Request | None) -> float:
    """What ``request`` costs after ``before``, as :func:`request_costs` charges it."""
    cached = 0 if before is None else chars_to_tokens(request.shared(before))
    return RequestCost.charged(pricing, chars_to_tokens(request.chars), cached).cost


def replay(
    transcript: Transcript, policy: str | None, pricing: Pricing
) -> tuple[float, float, float]:
    """Raw, scheduled and oracle cost of one session."""
    requests = list(transcript.requests())
    raw = sum(c.cost for c in request_costs([serialize(r) for r in requests], pricing))
    scheduled = 0.0
    best: dict[int, float] = {}  # boundary of the previous request -> cheapest total
    previous: dict[int, Request] = {}
    with tempfile.TemporaryDirectory(prefix="oracle-") as root:
        layered = {"spill.url": None, "spill.root": root}
        loaded = middleware.load_policy(policy, env={}, dotenv_path=False, overrides=layered)
        with middleware.Pipeline(loaded, session_id="oracle") as pipe, forced_boundary() as force:
            last: Request | None = None
            for k, history in enumerate(requests):
                force[0] = None
                own = Request(pipe.process(history, format=transcript.format).messages)
                scheduled += charge(pricing, own, last)
                last = own
                options: dict[int, Request] = {}
                seen: set[tuple[str, ...]] = set()
                for boundary in range(k + 2):  # a request of k assistant turns has at most k + 1
                    force[0] = boundary
                    request = Request(pipe.process(history, format=transcript.format).messages)
                    if request.key() not in seen:  # boundaries that compact alike: the lowest
                        seen.add(request.key())
                        options[boundary] = request
                current: dict[int, float] = {}
                for boundary, request in options.items():
                    if not previous:
                        current[boundary] = charge(pricing, request, None)
                        continue
                    current[boundary] = min(
                        total + charge(pricing, request, previous[before])
                        for before, total in best.items()
                        if before <= boundary
                    )
                best, previous = current, options
    return raw, scheduled, min(best.values(), default=0.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--source", choices=sorted(PATTERNS), default="claude-code")
    parser.add_argument("--policy", default=None, help="a policy file (default: the embedded one)")
    parser.add_argument("--pricing", choices=sorted(PRICING), default="anthropic-5m")
    args = parser.parse_args(argv)
    files = sorted(args.data.glob(PATTERNS[args.source]))
    if not files:
        print(f"skipped: no {args.source} sessions under {args.data}")
        return 0
    pricing = PRICING[args.pricing]
    totals = [0.0, 0.0, 0.0]
    print(f"{'session':44s} {'requests':>8s} {'schedule':>9s} {'oracle':>7s}")
    for file in files:
        for transcript in load_transcripts(file):
            raw, scheduled, oracle = replay(transcript, args.policy, pricing)
            if raw == 0:
                continue
            totals = [t + v for t, v in zip(totals, (raw, scheduled, oracle), strict=True)]
            print(f"{transcript.name[:44]:44s} {transcript.request_count:8d} "
                  f"{scheduled / raw:9.3f} {oracle / raw:7.3f}", flush=True)  # fmt: skip
    raw, scheduled, oracle = totals
    print(f"{'all':44s} {'':8s} {scheduled / raw:9.3f} {oracle / raw:7.3f}")
    print("cost relative to no middleware; schedule: the policy's own; oracle: the cheapest "
          "boundary sequence knowing the whole session")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
