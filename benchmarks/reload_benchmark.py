"""Reload latency: from writing a policy file to the new policy being in effect.

python benchmarks/reload_benchmark.py [--edits N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import middleware

POLICY = "version: 1\nname: edit-{i}\nbudget:\n  max_result_chars: {cap}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edits", type=int, default=30)
    args = parser.parse_args(argv)
    latencies: dict[str, list[float]] = {"write in place": [], "atomic rename": []}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "policy.yaml"
        path.write_text(POLICY.format(i=0, cap=20000), encoding="utf-8")
        with middleware.Pipeline.from_policy(path, watch=True) as pipe:
            for i in range(1, args.edits + 1):
                style = "atomic rename" if i % 2 else "write in place"
                text = POLICY.format(i=i, cap=20000 + i)
                start = time.perf_counter()
                if style == "atomic rename":
                    temporary = path.with_name(f".policy.{i}.tmp")
                    temporary.write_text(text, encoding="utf-8")
                    os.replace(temporary, path)
                else:
                    path.write_text(text, encoding="utf-8")
                while pipe.policy.name != f"edit-{i}":
                    if time.perf_counter() - start > 10:
                        print(f"edit {i} not seen within 10 s", file=sys.stderr)
                        return 1
                    time.sleep(0.001)
                latencies[style].append(time.perf_counter() - start)
                time.sleep(0.1)
    print(f"{'save':16} {'edits':>5} {'median ms':>10} {'p95 ms':>8} {'max ms':>8}")
    for style, values in latencies.items():
        p95 = statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]
        print(f"{style:16} {len(values):5d} {statistics.median(values) * 1e3:10.1f} "
              f"{p95 * 1e3:8.1f} {max(values) * 1e3:8.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
