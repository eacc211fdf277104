"""Effective cost (issue 17): a hidden reference costs what reading its result back costs,
once per result and session, and is attributed to the action that hid the result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from middleware.replay.costs import PRICING, readback_cost
from middleware.replay.simulate import PolicySpec, simulate
from middleware.replay.summaries import PolicySummary
from middleware.replay.transcripts import Transcript

PRICING_5M = PRICING["anthropic-5m"]


def big_result(*tokens: str) -> str:
    middle = "".join(f"def {token}():\n" for token in tokens)
    head = "".join(f"line {i} plain words\n" for i in range(400))
    return head + middle + "".join(f"more plain words {i}\n" for i in range(400))


def transcript(answers: list[str], results: dict[str, str]) -> Transcript:
    """Searches giving ``results`` (id -> text: not file reads, which the default keeps
    whole), then one assistant answer per entry of ``answers``, each followed by a small
    Bash call and its output."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "look around"}]
    for call_id, text in results.items():
        messages += [
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": call_id, "name": "Grep", "input": {"f": call_id}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call_id, "content": text}]},
        ]  # fmt: skip
    for i, answer in enumerate(answers):
        messages += [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": answer},
                    {"type": "tool_use", "id": f"b{i}", "name": "Bash", "input": {"c": "ls"}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"b{i}", "content": "ok"}],
            },
        ]
    messages.append({"role": "assistant", "content": "done"})
    return Transcript("t.json", "json", "anthropic", messages)


@pytest.fixture
def cutting(tmp_path: Path) -> PolicySpec:
    """A 2,000-character cap with no outline and no compaction: the middle is hidden."""
    path = tmp_path / "cut.yaml"
    path.write_text(
        "version: 1\nname: cut\nbudget:\n  max_result_chars: 2000\n  preview:\n"
        "    outline_chars: 0\nmicrocompact:\n  enabled: false\n",
        encoding="utf-8",
    )
    return PolicySpec("cut", str(path))


def run(t: Transcript, spec: PolicySpec, factor: float = 1.0) -> PolicySummary:
    return simulate([t], [spec], PRICING_5M, readback_factor=factor)[1]


def test_a_result_is_read_back_once_however_often_it_is_missed(cutting: PolicySpec) -> None:
    """Two names of one result, used in two answers: two hidden references, one read."""
    results = {"r1": big_result("secret_fn_42", "other_fn_7")}
    once = run(transcript(["plain", "call secret_fn_42", "plain"], results), cutting)
    twice = run(transcript(["plain", "call secret_fn_42", "then other_fn_7"], results), cutting)
    assert (once.hidden, twice.hidden) == (1, 2)
    assert once.readback_cost > 0
    assert twice.readback_cost == pytest.approx(once.readback_cost)
    assert once.hidden_by == {"budget:spilled": 1}
    assert once.relative_effective_cost > once.relative_cost


def test_two_results_missed_are_read_back_twice(cutting: PolicySpec) -> None:
    one = {"r1": big_result("alpha_fn_1"), "r2": big_result("beta_fn_2")}
    first = run(transcript(["plain", "use alpha_fn_1", "plain"], one), cutting)
    both = run(transcript(["plain", "use alpha_fn_1", "use beta_fn_2"], one), cutting)
    assert both.readback_cost > first.readback_cost * 1.5


def test_the_charge_is_one_cached_request_plus_the_result_written_again() -> None:
    assert readback_cost(PRICING_5M, 10_000, 2_000) == pytest.approx(0.1 * 10_000 + 1.25 * 2_000)


def test_the_read_back_price_is_a_parameter(cutting: PolicySpec) -> None:
    t = transcript(["plain", "call secret_fn_42"], {"r1": big_result("secret_fn_42")})
    base, double, none = (run(t, cutting, factor) for factor in (1.0, 2.0, 0.0))
    assert double.readback_cost == pytest.approx(2 * base.readback_cost)
    assert none.readback_cost == 0
    assert none.relative_effective_cost == pytest.approx(none.relative_cost)


def test_nothing_hidden_costs_nothing_more(cutting: PolicySpec) -> None:
    summary = run(transcript(["plain", "plain"], {"r1": big_result("secret_fn_42")}), cutting)
    assert summary.hidden == 0 and summary.readback_cost == 0
    figures = summary.sessions["t.json"].to_dict()
    assert figures["relative_effective_cost"] == figures["relative_cost"]
