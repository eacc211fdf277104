"""How long ``process()`` takes beside the JSON round trip any proxy pays anyway, side by
side in one run (issue 16):

* the five largest real requests and a synthetic 100 MB one: ``json.loads(json.dumps())``,
  cold ``process()`` (a fresh pipeline and cache on the spill folder an earlier process
  filled up to the previous request: a proxy restarted, or another replica), first
  ``process()`` (a fresh pipeline on an empty spill folder: every spill written), warm
  ``process()`` (the session's previous request already processed), and the ratios;
* whole sessions replayed request by request, against the JSON time of all their requests
  (best of three, each on a fresh pipeline and spill folder);
* peak memory of the 100 MB request against its parsed size (``--memory``; tracemalloc
  slows everything down, so it is measured apart).

    python benchmarks/speed_benchmark.py [--data DIR] [--repeat N] [--memory]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import middleware
from middleware.replay.transcripts import Transcript, load_transcripts

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"


def best_of(
    repeat: int, action: Callable[[], Any], setup: Callable[[], Any] | None = None
) -> float:
    """The fastest of ``repeat`` timed runs of ``action`` (``setup`` runs untimed before each)."""
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        gc.collect()
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


class Session:
    """A pipeline with a fresh cache, made untimed, on a spill folder of its own or on
    ``folder`` (kept: another session may have filled it)."""

    def __init__(self, overrides: dict[str, Any], folder: str | None = None) -> None:
        self.folder = None if folder else tempfile.TemporaryDirectory(prefix="speed-")
        root = folder or self.folder.name  # type: ignore[union-attr]
        policy = middleware.load_policy(
            None, env={}, dotenv_path=False,
            overrides={**overrides, "spill": {"root": root, "keep": True}},
        )  # fmt: skip
        self.pipe = middleware.Pipeline(policy, session_id="speed")

    def close(self) -> None:
        self.pipe.close()
        if self.folder is not None:
            self.folder.cleanup()


def measure(request: list[Any], previous: list[Any] | None, fmt: str, overrides: dict[str, Any],
            repeat: int) -> tuple[float, float, float, float]:  # fmt: skip
    """JSON round trip, cold, first and warm ``process()`` of ``request``, in seconds."""
    base = best_of(repeat, lambda: json.loads(json.dumps(request)))
    sessions: list[Session] = []
    filled = tempfile.TemporaryDirectory(prefix="speed-filled-")
    if previous is not None:  # what the process before the restart spilled
        earlier = Session(overrides, filled.name)
        earlier.pipe.process(previous, format=fmt)
        earlier.close()

    def fresh(folder: str | None = None) -> None:
        while sessions:
            sessions.pop().close()
        sessions.append(Session(overrides, folder))

    def warmed() -> None:
        fresh()
        if previous is not None:
            sessions[0].pipe.process(previous, format=fmt)

    process = lambda: sessions[0].pipe.process(request, format=fmt)  # noqa: E731
    cold = best_of(repeat, process, lambda: fresh(filled.name))
    first = best_of(repeat, process, fresh)
    warm = best_of(repeat, process, warmed)
    while sessions:
        sessions.pop().close()
    filled.cleanup()
    return base, cold, first, warm


def synthetic(result_mb: int = 50, messages: int = 4_000) -> tuple[list[Any], list[Any]]:
    """A 100 MB Anthropic history: one ``result_mb`` MB tool result and ``messages`` more
    messages of about 12 KB each; and the same history one turn shorter (the previous
    request)."""
    history: list[Any] = [{"role": "user", "content": "start"}]
    line = "src/module_%05d.py:%d: value = compute(x) + 1  # note\n"
    for i in range(messages // 2):
        call_id = f"toolu_{i:06d}"
        history.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Step {i}: looking at the next file."},
            {"type": "tool_use", "id": call_id, "name": "Read", "input": {"path": f"f{i}.py"}},
        ]})  # fmt: skip
        body = "".join(line % (i, n) for n in range(200))
        history.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call_id, "content": body},
        ]})  # fmt: skip
    big = "".join(line % (n % 99_999, n) for n in range(result_mb * 1_000_000 // 50))
    previous = list(history)
    history.append({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_big", "name": "Bash", "input": {"command": "cat log"}},
    ]})  # fmt: skip
    history.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_big", "content": big},
    ]})  # fmt: skip
    return history, previous


def peak_memory(request: list[Any], fmt: str) -> tuple[int, int]:
    """Bytes the parsed request takes (as its JSON's UTF-8 length) and the peak traced
    while a fresh pipeline processes it."""
    size = len(json.dumps(request, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    session = Session({})
    gc.collect()
    tracemalloc.start()
    try:
        session.pipe.process(request, format=fmt)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        session.close()
    return size, peak


def replay_times(transcript: Transcript, repeat: int = 3) -> tuple[float, float]:
    """The JSON round trips of all the session's requests, and its replay request by
    request on a fresh pipeline and spill folder: the fastest of ``repeat`` each."""
    requests = list(transcript.requests())
    sessions: list[Session] = []

    def replay() -> None:
        session = sessions.pop()
        try:
            for request in requests:
                session.pipe.process(request, format=transcript.format)
        finally:
            session.close()

    base = best_of(repeat, lambda: [json.loads(json.dumps(r)) for r in requests])
    took = best_of(repeat, replay, lambda: sessions.append(Session(transcript.policy_overrides)))
    return base, took


def print_row(name: str, request: list[Any], previous: list[Any] | None, fmt: str,
              overrides: dict[str, Any], *, repeat: int) -> None:  # fmt: skip
    """One line of the requests table."""
    chars = len(json.dumps(request))
    repeat = repeat if chars < 10_000_000 else 2
    base, cold, first, warm = measure(request, previous, fmt, overrides, repeat)
    print(f"{name[:45]:45} {chars:>11,} {base * 1e3:>8.1f} {cold * 1e3:>8.1f} "
          f"{first * 1e3:>8.1f} {warm * 1e3:>8.1f} {cold / base:>5.1f}x "
          f"{first / base:>5.1f}x {warm / base:>5.1f}x")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--memory", action="store_true", help="measure peak memory too")
    parser.add_argument("--no-synthetic", action="store_true", help="skip the 100 MB request")
    args = parser.parse_args(argv)
    transcripts: list[Transcript] = []
    if args.data.is_dir():
        files = [*args.data.glob("claude-code/*.jsonl"),
                 *args.data.glob("mini-swe-agent/**/*.traj.json")]  # fmt: skip
        transcripts = [t for f in sorted(files) for t in load_transcripts(f)]
    else:
        print(f"no trajectories at {args.data}: synthetic request only")
    largest = sorted(transcripts, key=lambda t: -len(json.dumps(t.messages)))[:5]

    print(f"{'request':45} {'chars':>11} {'json ms':>8} {'cold ms':>8} {'first ms':>8} "
          f"{'warm ms':>8} {'cold':>6} {'first':>6} {'warm':>6}")  # fmt: skip
    for t in largest:
        requests = list(t.requests())
        at = max(range(len(requests)), key=lambda i: len(json.dumps(requests[i])))
        previous = requests[at - 1] if at else None
        print_row(t.name, requests[at], previous, t.format, t.policy_overrides,
                  repeat=args.repeat)  # fmt: skip
    # Sessions are replayed before the synthetic request: the hundreds of megabytes it
    # spills leave the disk flushing, which slows the replays' own writes.
    sessions: list[str] = []
    for t in largest:
        base, took = replay_times(t)
        sessions.append(f"{t.name[:45]:45} {t.request_count:>8} {base:>8.2f} {took:>9.2f} "
                        f"{took / base:>5.1f}x")  # fmt: skip
    if not args.no_synthetic:
        big, before = synthetic()
        print_row("synthetic: 50 MB result + 4,000 messages", big, before, "anthropic", {},
                  repeat=args.repeat)  # fmt: skip
        del big, before
    print(f"\n{'whole session':45} {'requests':>8} {'json s':>8} {'replay s':>9} {'ratio':>6}")
    print("\n".join(sessions))

    if args.memory and not args.no_synthetic:
        size, peak = peak_memory(synthetic()[0], "anthropic")
        print(f"\npeak memory of the synthetic request: {peak / 1e6:,.0f} MB traced, "
              f"{peak / size:.2f}x its {size / 1e6:,.0f} MB of JSON")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
