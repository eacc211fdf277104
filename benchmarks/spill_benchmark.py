"""What a spill to an S3 store costs against a spill to a local folder, per result size.

Starts moto's S3 server (``moto_server``, from the ``moto[server]`` package the dev extra
installs) in a process of its own on loopback, then times ``save()`` of the same results
into a local workspace (temporary folder, fsync'd) and into ``s3://<bucket>/bench`` side by
side, in one run:

* local: a new result written to ``$TMPDIR`` (write, fsync, rename);
* S3, new: a result no replica stored yet (a GET that finds nothing, then one PUT);
* S3, seen: a result another replica stored already (one GET, compared, nothing written),
  what a replica pays the first time it meets an output another one spilled.

Every timed save stores a result never saved before by that store (the process remembers
what it stored, so a repeat would cost nothing). Loopback hides the network: against a real
S3 endpoint add its round trip (one for "seen", two for "new") and the transfer time.

Then, what one session leaves in the store (the input of the cost model of
docs/scaling.md): every request of the real sessions in ``--data`` replayed through the
default policy, and the objects and bytes each session's folder holds at the end.

    python benchmarks/spill_benchmark.py [--rounds N] [--sizes 10KB,...,10MB] [--data DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

import middleware
from middleware.replay.transcripts import load_transcripts
from middleware.spill.local import LocalRoot
from middleware.spill.objects import ObjectRoot
from middleware.spill.workspace import SpillWorkspace

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"

UNITS = {"KB": 1000, "MB": 1000**2}


def parse_size(text: str) -> int:
    number, unit = text[:-2], text[-2:].upper()
    return int(float(number) * UNITS[unit])


def content(size: int, salt: str) -> str:
    line = f"{salt} src/module.py:42: an ordinary line of tool output, status ok\n"
    return (line * (size // len(line) + 1))[:size]


@contextmanager
def moto_server() -> Iterator[str]:
    """``moto_server`` on a free loopback port, in its own process; yields its endpoint."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script = os.path.join(os.path.dirname(sys.executable), "moto_server")
    process = subprocess.Popen(
        [script, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(endpoint, timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=30)


def s3_filesystem(endpoint: str) -> object:
    """A filesystem of its own, as a new replica process has: nothing remembered."""
    import s3fs

    from middleware.spill.stores import S3_CLIENT

    return s3fs.S3FileSystem(
        skip_instance_cache=True,
        client_kwargs={"endpoint_url": endpoint},
        config_kwargs=S3_CLIENT,
    )


def session_footprint(data: Path) -> list[tuple[str, int, int, int]]:
    """(source, sessions, objects, bytes) the real sessions of ``data`` leave in a store."""
    patterns = {"Claude Code": "claude-code/**/*.jsonl", "SWE-agent": "swe-agent/**/*.traj",
                "mini-swe-agent": "mini-swe-agent/**/*.traj.json"}  # fmt: skip
    rows = []
    for source, pattern in patterns.items():
        with tempfile.TemporaryDirectory() as folder:
            sessions = 0
            for path in sorted(data.glob(pattern)):
                for transcript in load_transcripts(path):
                    sessions += 1
                    overrides = {"spill.root": folder, "spill.keep": True,
                                 **transcript.policy_overrides}  # fmt: skip
                    policy = middleware.load_policy(None, overrides=overrides, dotenv_path=False)
                    with middleware.Pipeline(policy, session_id=f"s{sessions}") as pipe:
                        for request in transcript.requests():
                            pipe.process(request, transcript.format)
            folders = LocalRoot(Path(folder)).sessions()
            rows.append((source, sessions, sum(f.files for f in folders),
                         sum(f.size for f in folders)))  # fmt: skip
    return rows


def timed(save: Callable[[], object]) -> float:
    started = time.perf_counter()
    save()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="saves per size and store")
    parser.add_argument("--sizes", default="10KB,100KB,1MB,10MB", help="result sizes")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="recorded sessions")
    args = parser.parse_args()
    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():  # fmt: skip
        os.environ.setdefault(name, value)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    rows = []
    with moto_server() as endpoint, tempfile.TemporaryDirectory() as folder:
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        writer, other = s3_filesystem(endpoint), s3_filesystem(endpoint)
        writer.mkdir(bucket)  # type: ignore[attr-defined]
        local = SpillWorkspace("bench", folder)
        remote = ObjectRoot(writer, f"{bucket}/bench", retry_after=30).workspace("bench")
        replica = ObjectRoot(other, f"{bucket}/bench", retry_after=30).workspace("bench")
        local.save("warmup", "w")  # the folders exist before the clock starts
        remote.save("warmup", "w")
        replica.save("warmup", "w")
        for size in sizes:
            times: dict[str, list[float]] = {"local": [], "new": [], "seen": []}
            for i in range(args.rounds):
                text = content(size, f"{size}-{i}-{uuid.uuid4().hex}")
                times["local"].append(timed(lambda: local.save(f"r{i}", text)))  # noqa: B023
                times["new"].append(timed(lambda: remote.save(f"r{i}", text)))  # noqa: B023
                times["seen"].append(timed(lambda: replica.save(f"r{i}", text)))  # noqa: B023
            median = {k: statistics.median(v) for k, v in times.items()}
            p95 = {k: sorted(v)[int(len(v) * 0.95) - 1] for k, v in times.items()}
            rows.append((size, median, p95))
        local.close()
    print(f"save() latency, median (p95) over {args.rounds} results per size; "
          "S3 = moto_server on loopback")  # fmt: skip
    print("| result size | local | S3, new | S3, seen by another replica | added by S3 (new) |")
    print("|---:|---:|---:|---:|---:|")
    for size, median, p95 in rows:
        label = f"{size / 1000:g} KB" if size < 1000**2 else f"{size / 1000**2:g} MB"
        cells = [f"{median[k]:.2f} ms ({p95[k]:.2f})" for k in ("local", "new", "seen")]
        print(f"| {label} | {' | '.join(cells)} | +{median['new'] - median['local']:.2f} ms |")
    if not args.data.is_dir():
        return
    print("\nWhat a session leaves in the store (default policy, every request replayed)")
    print("| source | sessions | objects per session | KB per session |")
    print("|---|---:|---:|---:|")
    for source, sessions, objects, size in session_footprint(args.data):
        print(f"| {source} | {sessions} | {objects / sessions:.1f} | "
              f"{size / sessions / 1000:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
