"""What telling a request's read-backs costs (issue 45, item 2), beside what cleaning it
costs: a Claude Code-like session of ``--turns`` tool calls (one output in ten spilled),
then requests that add a turn with no tool call, a turn with one call (a read of a file
read before), and one that reads a spill file back; and the same history seen by a
conversation state that is new (a restarted proxy).

Each request is processed by its conversation's pipeline as the proxy does it
(:meth:`.ConversationState.process`), then its read-backs told
(:meth:`.ConversationState.read_backs`); both are timed, the median of ``--repeat``.

    python benchmarks/readbacks.py [--turns 300] [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from session_builders import tool_turn  # noqa: E402

import middleware  # noqa: E402
from middleware.conversations import engine  # noqa: E402
from middleware.conversations.sessions import SessionPool  # noqa: E402
from middleware.plugin.host import PluginHost  # noqa: E402

BIG = "".join(f"row {i:04d} {'y' * 90}\n" for i in range(1, 401))


def timed(pool: SessionPool, policy: Any, messages: list[Any]) -> tuple[float, float, int]:
    """Seconds the pipeline and the read-backs took on one request, and how many."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages}
    state = pool.conversation("p", policy, "bench")
    started = time.perf_counter()
    result = engine.process(state, body, "anthropic")
    cleaned = time.perf_counter()
    found = state.read_backs(result.parsed, result.report.actions)
    return cleaned - started, time.perf_counter() - cleaned, len(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        policy = middleware.load_policy(None, env={}, dotenv_path=False,
                                        overrides={"spill.root": root})  # fmt: skip
        pool = SessionPool.for_policy(PluginHost.create(load_entrypoints=False), policy)
        history: list[Any] = [{"role": "user", "content": "Go."}]
        for i in range(args.turns):
            output = BIG if i % 10 == 0 else f"{i}: " + "x" * 3000
            history += tool_turn(f"c{i}", "Bash", {"command": f"cat /repo/f{i}.py"}, output)
        timed(pool, policy, history)
        spilled = next(p for p in Path(root).glob("*/tool-results/*"))
        rows = []
        cases = {
            "no tool call": lambda n: [{"role": "assistant", "content": f"Done {n}."},
                                       {"role": "user", "content": f"Go on {n}."}],
            "one call (a file read again)": lambda n: tool_turn(
                f"r{n}", "Bash", {"command": "cat /repo/f7.py"}, "7: " + "x" * 3000),
            "one call (a spill file read back)": lambda n: tool_turn(
                f"s{n}", "Read", {"file_path": str(spilled)}, BIG[:4000]),
        }  # fmt: skip
        for name, new in cases.items():
            cleaning, telling, counted = [], [], 0
            for n in range(args.repeat):
                history += new(n)
                took = timed(pool, policy, history)
                cleaning.append(took[0])
                telling.append(took[1])
                counted += took[2]
            rows.append((name, statistics.median(cleaning), statistics.median(telling), counted))
        fresh = SessionPool.for_policy(PluginHost.create(load_entrypoints=False), policy)
        took = timed(fresh, policy, history)
        rows.append(("a new state (a restart)", took[0], took[1], took[2]))
        pool.close()
        fresh.close()
    print(f"{args.turns} turns, {len(history)} messages; median of {args.repeat} requests")
    print(f"{'request':36} {'cleaning ms':>12} {'read-backs us':>14} {'counted':>8}")
    for name, cleaning_s, telling_s, counted in rows:
        print(f"{name:36} {cleaning_s * 1000:12.1f} {telling_s * 1e6:14.1f} {counted:8d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
