"""The schedule's per-turn sums (``microcompact/schedule.py``) against their definition: what
compaction at a boundary removes is the sum of each result's and input's gain at the level
its age gives it, and the first message a move changes is the first whose level differs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from middleware.steps.microcompact.schedule import Gain, TurnGains


def level(gain: Gain, boundary: int, truncate: int, summarize: int, clear: int) -> int:
    """0 kept, 1 truncated, 2 summarised (a result); 0 kept, 1 cleared (an input)."""
    age = boundary - 1 - gain.turn
    if gain.cleared:
        return int(age >= clear)
    return 2 if age >= max(summarize, truncate) else 1 if age >= truncate else 0


def removed(gain: Gain, boundary: int, truncate: int, summarize: int, clear: int) -> int:
    at = level(gain, boundary, truncate, summarize, clear)
    if gain.cleared:
        return gain.cleared if at else 0
    return (0, gain.truncated, gain.summarized)[at]


@st.composite
def gains(draw: st.DrawFn) -> tuple[int, list[Gain]]:
    turns = draw(st.integers(1, 12))
    out = []
    for turn in range(turns):
        if draw(st.booleans()):  # the turn's call, in its assistant message
            out.append(Gain(turn, turn * 10, cleared=draw(st.integers(1, 500))))
        for k in range(draw(st.integers(0, 2))):  # its results, in the message after
            out.append(Gain(turn, turn * 10 + 1 + k, draw(st.integers(0, 500)),
                            draw(st.integers(0, 500))))  # fmt: skip
    return turns, out


@settings(max_examples=300, deadline=None)
@given(gains(), st.integers(1, 3), st.integers(1, 3), st.integers(0, 3), st.data())
def test_turn_gains_follow_the_definition(
    drawn: tuple[int, list[Gain]], truncate: int, summarize: int, clear: int, data: st.DataObject
) -> None:
    turns, items = drawn
    ages = (truncate, summarize, clear)
    table = TurnGains(items, turns, *ages)
    for boundary in range(turns + 1):
        assert table.total(boundary) == sum(removed(g, boundary, *ages) for g in items)
    current = data.draw(st.integers(0, turns))
    candidate = data.draw(st.integers(current, turns + 3))
    changed = [g.node for g in items if level(g, current, *ages) != level(g, candidate, *ages)]
    assert table.first_changed_node(current, candidate) == (min(changed) if changed else None)
