"""Inject pairing faults into real agent sessions, repair them, check the result.

Reads the recorded sessions in ``../shared/data/trajectories`` (Claude Code JSONL as
Anthropic Messages, tau-bench and SWE-agent function-calling runs as OpenAI Chat), injects
each fault kind with a seeded random generator, repairs with the pipeline (pairing step
only, so the time is parse + repair + render), checks ``check_history()`` finds nothing, and
prints the validity rate and the time per repair for each source and fault kind::

    python benchmarks/pairing_faults.py [--data DIR] [--trials N] [--seed S] [--scale-only]

Sessions are read with ``middleware.replay.transcripts``. It then times the adversarial histories
of ``tests/steps/pairing/test_pairing_scale.py`` at growing sizes (one id reused across the
whole history, thousands of calls in one message, long runs of user messages), to show that
repair and checking grow linearly.
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

# -- adversarial histories (shared with tests/steps/pairing/test_pairing_scale.py) ----------


def _call(fmt: str, call_id: str, n: int) -> dict[str, Any]:
    if fmt == "anthropic":
        return {"type": "tool_use", "id": call_id, "name": "bash", "input": {"n": n}}
    if fmt == "openai":
        function = {"name": "bash", "arguments": f'{{"n": {n}}}'}
        return {"id": call_id, "type": "function", "function": function}
    return {"type": "function_call", "call_id": call_id, "name": "bash", "arguments": "{}"}


def _assistant(fmt: str, calls: list[dict[str, Any]]) -> Messages:
    if fmt == "anthropic":
        return [{"role": "assistant", "content": calls}]
    if fmt == "openai":
        return [{"role": "assistant", "content": None, "tool_calls": calls}]
    return calls


def _results(fmt: str, ids: list[str]) -> Messages:
    if fmt == "anthropic":
        blocks = [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids]
        return [{"role": "user", "content": blocks}]
    if fmt == "openai":
        return [{"role": "tool", "tool_call_id": i, "content": "ok"} for i in ids]
    return [{"type": "function_call_output", "call_id": i, "output": "ok"} for i in ids]


def _user(fmt: str, text: str) -> dict[str, Any]:
    if fmt == "responses":
        return {"type": "message", "role": "user", "content": text}
    return {"role": "user", "content": text}


def reused_id(messages: int, fmt: str) -> Messages:
    """``messages`` messages: turns that all call and answer the same id ``x``."""
    out: Messages = [_user(fmt, "go")]
    while len(out) < messages:
        out += _assistant(fmt, [_call(fmt, "x", len(out))]) + _results(fmt, ["x"])
    return out[:messages]


def idless_calls(calls: int, fmt: str) -> Messages:
    """One assistant turn of ``calls`` calls without ids, nothing answering them."""
    return [_user(fmt, "go"), *_assistant(fmt, [_call(fmt, "", n) for n in range(calls)])]


def parallel_calls(calls: int, fmt: str) -> Messages:
    """One assistant turn of ``calls`` calls, answered in reverse order."""
    ids = [f"c{n}" for n in range(calls)]
    head = _assistant(fmt, [_call(fmt, i, n) for n, i in enumerate(ids)])
    return [_user(fmt, "go"), *head, *_results(fmt, ids[::-1])]


def user_run(messages: int) -> Messages:
    """Anthropic: an unanswered call, then ``messages`` user messages in a row."""
    return [*_assistant("anthropic", [_call("anthropic", "t1", 0)])] + [
        _user("anthropic", f"note {n}") for n in range(messages)
    ]


SCALE_CASES: dict[str, Callable[[int, str], Messages]] = {
    "reused_id": reused_id,
    "idless_calls": idless_calls,
    "parallel_calls": parallel_calls,
}


def scale(sizes: tuple[int, ...] = (2_500, 5_000, 10_000, 20_000)) -> None:
    """Time pairing repair (pairing step only) and check_history() on the adversarial
    histories; near-linear code roughly doubles its time with each doubling of size."""
    host = PluginHost.create(load_entrypoints=False, builtins=("middleware.steps.pairing",))
    print(f"\n{'case':<16} {'format':<10} " + " ".join(f"{n:>9,}" for n in sizes))
    with middleware.Pipeline.from_policy(None, host=host) as pipe:
        for name, build in SCALE_CASES.items():
            for fmt in ("anthropic", "openai", "responses"):
                cells = []
                for n in sizes:
                    messages = build(n, fmt)
                    start = time.perf_counter()
                    pipe.process(messages, format=fmt)
                    cells.append(f"{time.perf_counter() - start:>8.2f}s")
                print(f"{name:<16} {fmt:<10} " + " ".join(cells))
    cells = []
    for n in sizes:
        messages = user_run(n)
        start = time.perf_counter()
        middleware.check_history(messages, "anthropic")
        cells.append(f"{time.perf_counter() - start:>8.2f}s")
    print(f"{'check user_run':<16} {'anthropic':<10} " + " ".join(cells))


# -- run --------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--trials", type=int, default=200, help="injections per source and fault")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--scale-only", action="store_true", help="only time the adversarial histories"
    )
    args = parser.parse_args(argv)
    if args.scale_only:
        scale()
        return 0
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
    scale()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
