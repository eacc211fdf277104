"""The shortcut for histories already paired (``pairing/valid.py``) never stands in for a
repair: whatever it accepts, the full analysis and layout leave exactly as they are and
report nothing. Checked on valid histories with injected faults and on fuzzed wire
messages, under every combination of the id rules; and it accepts what agents send (valid
histories, real Claude Code requests), or it would save nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from middleware.formats import get_codec
from middleware.replay.transcripts import load_transcripts
from middleware.steps.pairing.analysis import make_plan
from middleware.steps.pairing.placement import Layout
from middleware.steps.pairing.plan import CallEntry, Rules
from middleware.steps.pairing.step import keep_user_turn
from middleware.steps.pairing.valid import already_paired
from middleware.view import Node, ToolResult
from tests.pairing_builders import build
from tests.steps.pairing.test_pairing_fuzz import anthropic_message, openai_message
from tests.steps.pairing.test_pairing_properties import FAULT_PLAN, histories, inject

FORMATS = ("anthropic", "openai")
MISSING = "[missing]"
RULES = st.tuples(st.booleans(), st.booleans())
TRAJECTORIES = Path(__file__).resolve().parents[4] / "shared" / "data" / "trajectories"


def rules_for(fmt: str, unique: bool, sanitize: bool) -> Rules:
    codec = get_codec(fmt)
    return Rules(codec, unique_ids=unique, sanitize_ids=sanitize, missing_text=MISSING)


def full_repair(nodes: list[Node], rules: Rules) -> tuple[list[Node], list[str]]:
    """What the analysis and layout make of ``nodes``, and what they report."""
    reported: list[str] = []

    def record(kind: str, **_: Any) -> None:
        reported.append(kind)

    def synthesize(entry: CallEntry) -> ToolResult:
        return rules.codec.synthetic_result(entry.call, MISSING)

    plan = make_plan(nodes, rules, record)
    laid_out = Layout(nodes, plan, rules.codec, synthesize, record).run()
    keep_user_turn(nodes, laid_out, rules.codec, record)
    return laid_out, reported


def check(messages: list[dict[str, Any]], rules: Rules) -> bool:
    """Hold the shortcut to the full repair on ``messages``; whether it accepted them."""
    nodes = list(rules.codec.parse(messages).nodes)
    if not already_paired(nodes, rules):
        return False
    laid_out, reported = full_repair(nodes, rules)
    assert reported == []
    assert len(laid_out) == len(nodes)
    assert all(a is b for a, b in zip(laid_out, nodes, strict=True))
    return True


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=150)
@given(base=histories(), faults=FAULT_PLAN, flags=RULES)
def test_what_it_accepts_the_repair_leaves_alone(
    fmt: str, base: Any, faults: list[tuple[str, int]], flags: tuple[bool, bool]
) -> None:
    history = base
    for fault, pick in faults:
        history = inject(history, fault, pick)
    accepted = check(build(history, fmt), rules_for(fmt, *flags))
    if not faults:
        assert accepted  # a valid history is what it is for


@settings(max_examples=300)
@given(
    messages=st.lists(anthropic_message(ok=True), max_size=8)
    | st.lists(openai_message(ok=True), max_size=8),
    flags=RULES,
)
def test_fuzzed_messages(messages: list[dict[str, Any]], flags: tuple[bool, bool]) -> None:
    fmt = (
        "openai"
        if any(
            m.get("role") in ("tool", "system", "developer") or "tool_calls" in m for m in messages
        )
        else "anthropic"
    )
    try:
        rules = rules_for(fmt, *flags)
        rules.codec.parse(messages)
    except Exception:  # malformed for this format: the pipeline refuses it before pairing
        return
    check(messages, rules)


def test_real_claude_code_requests_take_the_shortcut() -> None:
    files = sorted(TRAJECTORIES.glob("claude-code/*.jsonl"))
    if not files:
        pytest.skip(f"no Claude Code sessions at {TRAJECTORIES}")
    rules = rules_for("anthropic", True, True)
    requests = [r for f in files for t in load_transcripts(f) for r in t.requests()]
    accepted = sum(check(r, rules) for r in requests)
    assert accepted >= 0.9 * len(requests)


def _turn(call_id: str, user: list[dict[str, Any]]) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": call_id, "name": "bash", "input": {}}
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": user},
    ]


def _result(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "out"}


NEAR_MISSES = {
    "result after text": _turn("c1", [{"type": "text", "text": "note"}, _result("c1")]),
    "id the API rejects": _turn("call_1|fc_2", [_result("call_1|fc_2")]),
    "id too long": _turn("c" * 65, [_result("c" * 65)]),
    "result in a later message": [
        *_turn("c1", [{"type": "text", "text": "wait"}]),
        {"role": "user", "content": [_result("c1")]},
    ],
}


@pytest.mark.parametrize("name", NEAR_MISSES)
def test_near_misses_are_repaired_in_full(name: str) -> None:
    """Histories one detail away from valid, which the generators rarely draw."""
    for unique, sanitize in ((True, True), (False, True)):
        rules = rules_for("anthropic", unique, sanitize)
        assert not check(NEAR_MISSES[name], rules)
        _, reported = full_repair(list(rules.codec.parse(NEAR_MISSES[name]).nodes), rules)
        assert reported  # the repair acts on each
