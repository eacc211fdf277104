"""What isolating third-party plugins costs: ``process()`` on a synthetic history with the
built-in plugins only, then with a third-party capability plugin (asked once or twice per
tool result, each call on a worker thread under the time limit) and a third-party step
plugin (one call on copies of the conversation and the context). Figures go to stdout;
the difference from the first row is the isolation's cost (docs/plugins.md).

    python benchmarks/plugin_overhead.py [--results N] [--repeat N]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import middleware
from middleware import hookimpl
from middleware.plugin.context import StepContext
from middleware.plugin.host import PluginHost
from middleware.plugin.runner import TimeLimits
from middleware.view import Conversation


class NoCaps:
    """A capability plugin that knows no tool (the steps ask it for every result)."""

    calls = 0

    @hookimpl
    def tool_result_cap(self, tool_name: str) -> None:
        NoCaps.calls += 1


class NoOpStep:
    """A step plugin that reads every result and changes nothing."""

    @hookimpl
    def enforce_budget(self, conversation: Conversation, context: StepContext) -> None:
        for _ in conversation.index().results:
            pass


def history(results: int) -> list[dict[str, Any]]:
    """One turn of ``results`` parallel calls (recent: nothing for compaction to do, so
    the figures are the budget step's and the plugins'), one result over its cap."""
    calls = [
        {"id": f"call_{i}", "type": "function",
         "function": {"name": f"tool_{i % 7}", "arguments": "{}"}}
        for i in range(results)
    ]  # fmt: skip
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": calls},
    ]
    for i in range(results):
        size = 30_000 if i == 0 else 400
        text = f"line {i}\n" * (size // 8)
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": text})
    return messages


def best_of(repeat: int, action: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    messages = history(args.results)
    policy = middleware.load_policy(env={}, dotenv_path=False)
    setups: dict[str, tuple[object, ...]] = {
        "built-in plugins only": (),
        "+ third-party tool_result_cap": (NoCaps(),),
        "+ third-party enforce_budget": (NoOpStep(),),
        "+ both": (NoCaps(), NoOpStep()),
    }
    baseline = None
    print(f"{args.results} tool results; best of {args.repeat}", file=sys.stderr)
    print(f"{'plugins':32} {'process ms':>11} {'extra ms':>9} {'cap calls':>10} {'µs/call':>8}")
    for name, plugins in setups.items():
        host = PluginHost.create(load_entrypoints=False)
        for i, plugin in enumerate(plugins):
            host.register(plugin, name=f"bench-{i}")
        with middleware.Pipeline(policy, host=host, session_id="bench") as pipe:
            pipe.process(messages)  # warm up: workspace, worker threads
            NoCaps.calls = 0
            took = best_of(args.repeat, lambda p=pipe: p.process(messages))
        calls = NoCaps.calls // args.repeat
        baseline = took if baseline is None else baseline
        extra = (took - baseline) * 1e3
        per_call = f"{(took - baseline) / calls * 1e6:8.1f}" if calls else f"{'':>8}"
        print(f"{name:32} {took * 1e3:>11.2f} {extra:>9.2f} {calls:>10} {per_call}")
    calls = 20_000
    limits = TimeLimits()
    nothing = NoCaps().tool_result_cap
    inline = best_of(3, lambda: [nothing("t") for _ in range(calls)]) / calls
    call = partial(nothing, "t")
    limited = best_of(3, lambda: [limits.run("key", call, 1.0) for _ in range(calls)]) / calls
    print(f"\none call: inline {inline * 1e6:.2f} µs, on a worker under a limit "
          f"{limited * 1e6:.1f} µs")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
