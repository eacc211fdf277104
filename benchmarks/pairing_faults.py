"""Inject pairing faults into real agent sessions, repair them, check the result.

Reads the recorded sessions in ``../shared/data/trajectories`` (Claude Code JSONL as
Anthropic Messages, tau-bench and SWE-agent function-calling runs as OpenAI Chat), injects
each fault kind with a seeded random generator, repairs with the pipeline (pairing step
only, so the time is parse + repair + render), checks ``check_history()`` finds nothing, and
prints the validity rate and the time per repair for each source and fault kind::

    python benchmarks/pairing_faults.py [--data DIR] [--trials N] [--seed S]

Sessions are read with ``middleware.transcripts``.
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import middleware
from middleware.plugin.host import PluginHost
from middleware.replay.transcripts import load_transcripts

Messages = list[dict[str, Any]]
REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "trajectories"

# -- sessions -------------------------------------------------------------------------------


def load_sessions(root: Path) -> dict[str, list[tuple[str, str, Messages]]]:
    """Every structured-tool-call transcript under ``root``, by source: (name, format,
    messages). Text-protocol agents have no tool ids to pair and are left out."""
    patterns = ("claude-code/**/*.jsonl", "tau-bench/*.json", "swe-agent/**/*.traj")
    sessions: dict[str, list[tuple[str, str, Messages]]] = {}
    for pattern in patterns:
        for path in sorted(root.glob(pattern)):
            for t in load_transcripts(path):
                if not t.policy_overrides:
                    sessions.setdefault(t.source, []).append((t.name, t.format, t.messages))
    return sessions


# -- faults -----------------------------------------------------------------------------------
# Each fault returns a new list; the messages it changes are copies (the session is reused).


def _calls(m: dict[str, Any], fmt: str) -> list[dict[str, Any]]:
    if m.get("role") != "assistant":
        return []
    if fmt == "openai":
        return list(m.get("tool_calls") or [])
    content = m.get("content")
    return [b for b in content if b.get("type") == "tool_use"] if isinstance(content, list) else []


def _result_sites(msgs: Messages, fmt: str) -> list[tuple[int, int]]:
    if fmt == "openai":
        return [(i, -1) for i, m in enumerate(msgs) if m.get("role") == "tool"]
    return [
        (i, k)
        for i, m in enumerate(msgs)
        if m["role"] == "user" and isinstance(m["content"], list)
        for k, b in enumerate(m["content"])
        if b.get("type") == "tool_result"
    ]


def _call_sites(msgs: Messages, fmt: str) -> list[int]:
    return [i for i, m in enumerate(msgs) if _calls(m, fmt)]


def _set_call_id(msgs: Messages, i: int, k: int, new: str, fmt: str) -> None:
    msgs[i] = copy.deepcopy(msgs[i])
    if fmt == "openai":
        msgs[i]["tool_calls"][k]["id"] = new
    else:
        [b for b in msgs[i]["content"] if b.get("type") == "tool_use"][k]["id"] = new


def drop_result(msgs: Messages, fmt: str, rng: random.Random) -> Messages:
    out = list(msgs)
    i, k = rng.choice(_result_sites(out, fmt))
    if k < 0:
        del out[i]
    else:
        out[i] = {**out[i], "content": out[i]["content"][:k] + out[i]["content"][k + 1 :]}
        if not out[i]["content"]:
            del out[i]
    return out


def cut_after_call(msgs: Messages, fmt: str, rng: random.Random) -> Messages:
    return msgs[: rng.choice(_call_sites(msgs, fmt)) + 1]


def duplicate_id_in_message(msgs: Messages, fmt: str, rng: random.Random) -> Messages:
    out = list(msgs)
    i = rng.choice(_call_sites(out, fmt))
    m = copy.deepcopy(out[i])
    key = "tool_calls" if fmt == "openai" else "content"
    repeat = copy.deepcopy(rng.choice(_calls(m, fmt)))
    m[key].append(repeat)
    out[i] = m
    return out


def duplicate_id_across_turns(msgs: Messages, fmt: str, rng: random.Random) -> Messages:
    """A later call (and its result) reuses the id of an earlier call."""
    out = list(msgs)
    sites = _call_sites(out, fmt)
    if len(sites) < 2:
        return out
    first, later = sorted(rng.sample(sites, 2))
    old = _calls(out[later], fmt)[0]["id"]
    new = rng.choice(_calls(out[first], fmt))["id"]
    _set_call_id(out, later, 0, new, fmt)
    for i, k in _result_sites(out, fmt):
        if i <= later:
            continue
        if k < 0 and out[i].get("tool_call_id") == old:
            out[i] = {**out[i], "tool_call_id": new}
            break
        if k >= 0 and out[i]["content"][k].get("tool_use_id") == old:
            out[i] = copy.deepcopy(out[i])
            out[i]["content"][k]["tool_use_id"] = new
            break
    return out


def orphan_result(msgs: Messages, fmt: str, rng: random.Random) -> Messages:
    out = list(msgs)
    ghost = f"ghost_{rng.randrange(10**9)}"
    if fmt == "openai":
        item: dict[str, Any] = {"role": "tool", "tool_call_id": ghost, "content": "stale output"}
    else:
        block = {"type": "tool_result", "tool_use_id": ghost, "content": "stale output"}
        item = {"role": "user", "content": [block]}
    out.insert(rng.randrange(len(out) + 1), item)
    return out


def interposed_user(msgs: Messages, fmt: str, rng: random.Random) -> Messages:
    out = list(msgs)
    i = rng.choice(_call_sites(out, fmt))
    out.insert(i + 1, {"role": "user", "content": "SECURITY BLOCK: command needs approval"})
    return out


def reorder_results(msgs: Messages, fmt: str, rng: random.Random) -> Messages:
    """Reverse the results of one block (still valid: order inside a block is free)."""
    out = list(msgs)
    i = rng.choice(_call_sites(out, fmt))
    if fmt == "openai":
        j = i + 1
        while j < len(out) and out[j].get("role") == "tool":
            j += 1
        out[i + 1 : j] = reversed(out[i + 1 : j])
    elif i + 1 < len(out) and isinstance(out[i + 1].get("content"), list):
        content = out[i + 1]["content"]
        results = [b for b in content if b.get("type") == "tool_result"]
        others = [b for b in content if b.get("type") != "tool_result"]
        out[i + 1] = {**out[i + 1], "content": results[::-1] + others}
    return out


def empty_call_id(msgs: Messages, fmt: str, rng: random.Random) -> Messages:
    out = list(msgs)
    i = rng.choice(_call_sites(out, fmt))
    _set_call_id(out, i, rng.randrange(len(_calls(out[i], fmt))), "", fmt)
    return out


FAULTS: dict[str, Callable[[Messages, str, random.Random], Messages]] = {
    "none": lambda msgs, fmt, rng: msgs,
    "drop_result": drop_result,
    "cut_after_call": cut_after_call,
    "duplicate_id_in_message": duplicate_id_in_message,
    "duplicate_id_across_turns": duplicate_id_across_turns,
    "orphan_result": orphan_result,
    "interposed_user": interposed_user,
    "reordered_results": reorder_results,
    "empty_call_id": empty_call_id,
}

# -- run --------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--trials", type=int, default=200, help="injections per source and fault")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"no trajectories at {args.data}; nothing to benchmark")
        return 0

    host = PluginHost.create(load_entrypoints=False, builtins=("middleware.steps.pairing",))
    pipe = middleware.Pipeline.from_policy(None, host=host)
    rng = random.Random(args.seed)
    rows = []
    failures = 0
    for source, loaded in load_sessions(args.data).items():
        fmt = loaded[0][1]
        sessions = [(name, msgs) for name, _, msgs in loaded if _call_sites(msgs, fmt)]
        if not sessions:
            continue
        clean = sum(not middleware.check_history(msgs, fmt) for _, msgs in sessions)
        print(f"{source}: {len(sessions)} sessions ({fmt}), {clean} valid as recorded")
        for fault, inject in FAULTS.items():
            times: list[float] = []
            valid = changed = 0
            for _ in range(args.trials):
                name, msgs = rng.choice(sessions)
                faulty = inject(msgs, fmt, rng)
                start = time.perf_counter_ns()
                result = pipe.process(faulty, format=fmt)
                times.append((time.perf_counter_ns() - start) / 1000)
                changed += result.changed
                if middleware.check_history(result.messages, fmt):
                    failures += 1
                    print(f"  INVALID after repair: {source} {fault} {name}", file=sys.stderr)
                else:
                    valid += 1
            rows.append((source, fault, args.trials, valid, changed, times))
    pipe.close()

    header = f"{'source':<12} {'fault':<26} {'trials':>6} {'valid':>7} {'repaired':>8} "
    header += f"{'median us':>10} {'p95 us':>10}"
    print()
    print(header)
    print("-" * len(header))
    for source, fault, n, valid, changed, times in rows:
        print(
            f"{source:<12} {fault:<26} {n:>6} {100 * valid / n:>6.1f}% {changed:>8} "
            f"{statistics.median(times):>10.0f} {percentile(times, 0.95):>10.0f}"
        )
    total = sum(r[2] for r in rows)
    print(f"\nvalidity after repair: {100 * (total - failures) / max(total, 1):.1f}% of {total}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
