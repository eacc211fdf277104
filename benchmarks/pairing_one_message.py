"""Pairing repair on ONE assistant message holding thousands of tool calls (issue 26,
item 12), in all three formats::

    python benchmarks/pairing_one_message.py [--sizes 1000,5000,20000] [--repeat N]
        [--cases idless_answered,...] [--full]

Each case is one assistant message (Responses: one run of call items) of ``n`` calls and
what follows it: ids missing or empty, answered or not, results in reverse order, every
call and result sharing one id, and (Responses) thousands of unnamed function calls
sharing an id with an unnamed custom tool call, answered by custom tool outputs. The time
is the pairing step alone with what every request pays around it (parse, repair, the
host's check of the step's edits, render), the best of ``--repeat`` runs on a fresh
pipeline; near-linear work multiplies it by about 5 from 1,000 to 5,000 calls and by 4
from 5,000 to 20,000 (on a busy machine, garbage collection adds to the largest sizes).

``--full`` also times the default policy (one run per cell; spill to a temporary folder).
Its budget step holds the turn's results to ``budget.turn_budget_chars``: thousands of
synthetic results are over it, and each is written to the spill store (one fsync) before
the step finds that no preview is shorter than the result, so that column is mostly disk.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import middleware
from middleware.plugin.host import PluginHost

Messages = list[dict[str, Any]]
FORMATS = ("anthropic", "openai", "responses")

# -- one message of n calls (shared with tests/steps/pairing/test_pairing_one_message.py) --

#: No id at all (``None``), an empty one (``""``), or the id itself.
CallId = str | None


def _call(fmt: str, call_id: CallId, n: int, name: str = "bash") -> dict[str, Any]:
    if fmt == "anthropic":
        block: dict[str, Any] = {"type": "tool_use", "name": name, "input": {"n": n}}
        key = "id"
    elif fmt == "openai":
        block = {"type": "function", "function": {"name": name, "arguments": f'{{"n": {n}}}'}}
        key = "id"
    else:
        block = {"type": "function_call", "name": name, "arguments": f'{{"n": {n}}}'}
        key = "call_id"
    if call_id is not None:
        block[key] = call_id
    return block


def _result(fmt: str, call_id: CallId, n: int) -> dict[str, Any]:
    if fmt == "anthropic":
        block: dict[str, Any] = {"type": "tool_result", "content": f"out {n}"}
        key = "tool_use_id"
    elif fmt == "openai":
        block, key = {"role": "tool", "content": f"out {n}"}, "tool_call_id"
    else:
        block, key = {"type": "function_call_output", "output": f"out {n}"}, "call_id"
    if call_id is not None:
        block[key] = call_id
    return block


def _user(fmt: str, text: str) -> dict[str, Any]:
    if fmt == "responses":
        return {"type": "message", "role": "user", "content": text}
    return {"role": "user", "content": text}


def one_message(fmt: str, calls: list[dict[str, Any]], results: list[dict[str, Any]]) -> Messages:
    """A user turn, one assistant message holding ``calls``, then ``results`` (Anthropic:
    all in the next user message) and a closing user message."""
    if fmt == "anthropic":
        turn: Messages = [{"role": "assistant", "content": calls}]
        answers: Messages = [{"role": "user", "content": results}] if results else []
    elif fmt == "openai":
        turn, answers = [{"role": "assistant", "content": None, "tool_calls": calls}], results
    else:
        turn, answers = calls, results
    return [_user(fmt, "go"), *turn, *answers, _user(fmt, "next")]


def idless_answered(n: int, fmt: str) -> Messages:
    """``n`` calls without ids, answered by ``n`` results without ids."""
    return one_message(
        fmt, [_call(fmt, None, i) for i in range(n)], [_result(fmt, None, i) for i in range(n)]
    )


def empty_ids_answered(n: int, fmt: str) -> Messages:
    """``n`` calls with empty ids, answered by ``n`` results with empty ids."""
    return one_message(
        fmt, [_call(fmt, "", i) for i in range(n)], [_result(fmt, "", i) for i in range(n)]
    )


def idless_unanswered(n: int, fmt: str) -> Messages:
    """``n`` calls without ids and nothing answering them."""
    return one_message(fmt, [_call(fmt, None, i) for i in range(n)], [])


def ids_reversed(n: int, fmt: str) -> Messages:
    """``n`` calls with ids, answered in reverse order (Anthropic: in one user message)."""
    calls = [_call(fmt, f"c{i}", i) for i in range(n)]
    return one_message(fmt, calls, [_result(fmt, f"c{i}", i) for i in reversed(range(n))])


def one_id(n: int, fmt: str) -> Messages:
    """``n`` calls and ``n`` results all with the id ``x`` (duplicates in one message)."""
    return one_message(
        fmt, [_call(fmt, "x", i) for i in range(n)], [_result(fmt, "x", i) for i in range(n)]
    )


def mixed_kinds(n: int, fmt: str) -> Messages:
    """Responses: ``n`` unnamed function calls and one unnamed custom tool call, all with
    the call id ``x``, then ``n`` custom tool outputs with that id (each output used to
    look at every function call before finding the custom one)."""
    if fmt != "responses":
        return one_id(n, fmt)
    calls = [_call(fmt, "x", i, name="") for i in range(n)]
    calls.append({"type": "custom_tool_call", "call_id": "x", "name": "", "input": "p"})
    outputs = [
        {"type": "custom_tool_call_output", "call_id": "x", "output": f"out {i}"} for i in range(n)
    ]
    return one_message(fmt, calls, outputs)


CASES: dict[str, Callable[[int, str], Messages]] = {
    "idless_answered": idless_answered,
    "empty_ids_answered": empty_ids_answered,
    "idless_unanswered": idless_unanswered,
    "ids_reversed": ids_reversed,
    "one_id": one_id,
    "mixed_kinds": mixed_kinds,
}

# -- run --------------------------------------------------------------------------------------


def pairing_only() -> middleware.Pipeline:
    host = PluginHost.create(load_entrypoints=False, builtins=("middleware.steps.pairing",))
    return middleware.Pipeline.from_policy(None, host=host)


def default_policy(folder: str) -> middleware.Pipeline:
    policy = middleware.load_policy(
        None, env={}, dotenv_path=False, overrides={"spill": {"root": folder}}
    )
    return middleware.Pipeline(policy)


def best_of(
    repeat: int, make: Callable[[], middleware.Pipeline], messages: Messages, fmt: str
) -> float:
    """The fastest of ``repeat`` runs, each on a fresh pipeline (made untimed)."""
    times = []
    for _ in range(repeat):
        with make() as pipe:
            gc.collect()
            start = time.perf_counter()
            pipe.process(messages, format=fmt)
            times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,20000", help="calls in the message")
    parser.add_argument("--repeat", type=int, default=3, help="runs per cell (best kept)")
    parser.add_argument("--full", action="store_true", help="also time the default policy")
    parser.add_argument("--cases", default=",".join(CASES), help="which cases, comma-separated")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    cases = {name: CASES[name] for name in args.cases.split(",")}
    columns = [("pairing", pairing_only)]
    with tempfile.TemporaryDirectory(prefix="pairing-one-") as folder:
        if args.full:
            columns.append(("default", lambda: default_policy(folder)))
        for label, make in columns:
            print(
                f"\n{label + ' step(s)':<20} {'format':<10} " + " ".join(f"{n:>9,}" for n in sizes)
            )
            for name, build in cases.items():
                for fmt in FORMATS:
                    if name == "mixed_kinds" and fmt != "responses":
                        continue
                    repeat = 1 if label == "default" else args.repeat
                    cells = [f"{best_of(repeat, make, build(n, fmt), fmt):>8.2f}s" for n in sizes]
                    print(f"{name:<20} {fmt:<10} " + " ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
