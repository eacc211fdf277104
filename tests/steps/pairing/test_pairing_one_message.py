"""Pairing repair works in proportion to the calls of one message, however many it holds
(issue 26, item 12): ids missing or empty, answered or not, in reverse order, all calls
sharing one id, thousands of unnamed calls of one kind before a call of another.

No timing: the work is counted, for ``N`` and ``4 * N`` calls in one message. Work that
grows with the square of the calls is 16 times larger for 4 times the calls; linear work
is at most 4 times larger (less with the fixed costs). Counting Python calls sees loops
written in Python (comprehensions and generator expressions included), not a scan done
inside one C call (``list.index``); ``test_pairing_scale.py`` runs the largest histories
under a timeout for those. Real timings: ``benchmarks/pairing_one_message.py``.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import pytest

import middleware
from benchmarks.pairing_one_message import CASES, FORMATS, mixed_kinds
from middleware.formats.wire.responses import ResponsesCodec
from middleware.plugin.host import PluginHost
from middleware.view import ToolCall, ToolResult

N = 300
#: Linear work grows at most 4 times (fixed costs aside); quadratic work 16 times.
RATIO = 5.0


def pairing_only() -> middleware.Pipeline:
    host = PluginHost.create(load_entrypoints=False, builtins=("middleware.steps.pairing",))
    return middleware.Pipeline.from_policy(None, host=host)


def calls_made(messages: list[Any], fmt: str) -> int:
    """The Python calls (a generator resumed included) ``process()`` makes on a fresh
    pairing-only pipeline."""
    count = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event == "call":
            count += 1

    with pairing_only() as pipe:
        sys.setprofile(profile)
        try:
            result = pipe.process(messages, format=fmt)
        finally:
            sys.setprofile(None)
    assert middleware.check_history(result.messages, fmt) == []
    return count


CASE_FORMATS = [
    (name, fmt) for name in CASES for fmt in FORMATS if name != "mixed_kinds" or fmt == "responses"
]


@pytest.mark.parametrize(("name", "fmt"), CASE_FORMATS)
def test_work_grows_linearly_with_the_calls_of_one_message(name: str, fmt: str) -> None:
    small = calls_made(CASES[name](N, fmt), fmt)
    large = calls_made(CASES[name](4 * N, fmt), fmt)
    assert small > N  # the repair's work is seen (it runs in this thread)
    assert large <= RATIO * small, f"{name}/{fmt}: {small} calls for {N}, {large} for {4 * N}"


def test_each_output_asks_once_per_kind_of_call_not_once_per_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # N unnamed function calls and one unnamed custom call share the id x; each of the N
    # custom outputs was compared with every function call before reaching its own.
    asked = 0
    answers = ResponsesCodec.answers

    def counted(self: ResponsesCodec, result: ToolResult, call: ToolCall) -> bool:
        nonlocal asked
        asked += 1
        return answers(self, result, call)

    monkeypatch.setattr(ResponsesCodec, "answers", counted)
    with pairing_only() as pipe:
        result = pipe.process(mixed_kinds(4 * N, "responses"), format="responses")
    # Two kinds of call: at most two questions to see whether an output fits, two to find
    # the call it answers.
    assert asked <= 4 * (4 * N)
    kinds = [a.kind for a in result.report.actions]
    assert kinds.count("unnamed_call_dropped") == 4 * N + 1
    assert kinds.count("orphan_dropped") == 4 * N  # each reported with its content
