"""The schedule's per-turn sums (``microcompact/schedule.py``) against their definition: what
compaction at a boundary removes is the sum of each result's and input's gain at the level
its age gives it, and the first message a move changes is the first whose level differs."""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st

from middleware.session.cold_cache import ColdCache
from middleware.steps.microcompact.schedule import Gain, TurnGains, boundary
from middleware.steps.microcompact.settings import MicrocompactSettings


def level(gain: Gain, boundary: int, truncate: int, summarize: int, clear: int) -> int:
    """0 kept, 1 truncated, 2 summarised (a result); 0 kept, 1 cleared (an input)."""
    age = boundary - 1 - gain.turn
    if gain.cleared:
        return int(age >= clear)
    if boundary < gain.released:
        return 0
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
            out.append(
                Gain(turn, turn * 10 + 1 + k, draw(st.integers(0, 500)), draw(st.integers(0, 500)))
            )
    return turns, out


@settings(max_examples=300)
@given(gains(), st.integers(1, 3), st.integers(1, 3), st.integers(0, 3), st.data())
def test_turn_gains_follow_the_definition(
    drawn: tuple[int, list[Gain]], truncate: int, summarize: int, clear: int, data: st.DataObject
) -> None:
    turns, items = drawn
    ages = (truncate, summarize, clear)
    table = TurnGains(items, turns, *ages)
    for at in range(turns + 1):
        assert table.total(at) == sum(removed(g, at, *ages) for g in items)
    current = data.draw(st.integers(0, turns))
    candidate = data.draw(st.integers(current, turns + 3))
    changed = [g.node for g in items if level(g, current, *ages) != level(g, candidate, *ages)]
    assert table.first_changed_node(current, candidate) == (min(changed) if changed else None)
    for node in {g.node for g in items} | {0, max(g.node for g in items) + 1} if items else {0}:
        after = sum(removed(g, current, *ages) for g in items if g.node >= node)
        assert table.removed_from(current, node) == after


@st.composite
def history(draw: st.DrawFn) -> tuple[list[int], list[int], list[Gain]]:
    """Per node, its turn and size (an assistant message, then a user message of results,
    per turn), and the gains of its results (some protected until a later boundary) and
    call input."""
    turns = draw(st.integers(1, 30))
    node_turns, sizes, items = [-1], [draw(st.integers(10, 3_000))], []
    for turn in range(turns):
        call, results = len(node_turns), len(node_turns) + 1
        node_turns += [turn, turn]
        sizes += [draw(st.integers(10, 20_000)), draw(st.integers(10, 60_000))]
        if draw(st.booleans()):
            items.append(Gain(turn, call, cleared=draw(st.integers(1, 5_000))))
        if draw(st.booleans()):  # a protected read is released at a later boundary
            released = draw(st.one_of(st.just(0), st.integers(turn + 1, turns + 2)))
            items.append(
                Gain(
                    turn,
                    results,
                    draw(st.integers(0, 50_000)),
                    draw(st.integers(0, 50_000)),
                    released=released,
                )
            )
    return node_turns, sizes, items


def weighed_at(
    items: list[Gain], turns: int, truncate: int, summarize: int, clear: int
) -> list[Gain]:
    """The gains as a request of ``turns`` turns weighs them: a summary's once its result can
    be summarised, an input's once it can be cleared (microcompact/weighing.py)."""
    out = []
    for gain in items:
        if gain.cleared:
            if gain.turn < turns - clear:
                out.append(gain)
        elif gain.turn >= turns - max(summarize, truncate):
            out.append(gain._replace(summarized=0))
        else:
            out.append(gain)
    return out


@settings(max_examples=300)
@given(history(), st.data())
def test_decisions_carried_from_an_earlier_request_decide_alike(
    drawn: tuple[list[int], list[int], list[Gain]], data: st.DataObject
) -> None:
    """The boundary of a request that takes an earlier request's decisions is the one it
    finds by itself: each decision reads only the turns before its candidate."""
    import middleware
    from middleware.policy.settings import bind
    from middleware.steps.microcompact.schedule import boundary
    from middleware.steps.microcompact.settings import MicrocompactSettings

    node_turns, sizes, items = drawn
    truncate, summarize = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    clear, step = data.draw(st.integers(0, 3)), data.draw(st.integers(1, 3))
    trigger = data.draw(st.sampled_from([0, 2_000, 20_000]))
    overrides = {
        "microcompact": {
            "truncate_turns": truncate,
            "summarize_turns": summarize,
            "inputs": {"clear_turns": clear},
            "schedule": {"step_turns": step, "trigger_tokens": trigger, "min_reclaim_tokens": 50},
        }
    }
    s = bind(
        middleware.load_policy(env={}, dotenv_path=False, overrides=overrides), MicrocompactSettings
    )
    ages = (truncate, summarize, clear)
    turns = node_turns[-1] + 1
    earlier = data.draw(st.integers(1, turns))  # the earlier request ends with that turn
    cut = node_turns.index(earlier - 1) + 2 if earlier < turns else len(node_turns)
    before = [g for g in items if g.node < cut]
    table = TurnGains(weighed_at(before, earlier, *ages), earlier, *ages)
    _, decided, _ = boundary(s, table, sizes[:cut], node_turns[:cut], earlier)
    table = TurnGains(weighed_at(items, turns, *ages), turns, *ages)
    alone = boundary(s, table, sizes, node_turns, turns)
    assert boundary(s, table, sizes, node_turns, turns, decided=decided) == alone
    cut_back = data.draw(st.integers(0, earlier))  # the earlier request cut to fewer turns
    shorter = boundary(s, table, sizes, node_turns, turns, decided=decided.up_to(cut_back))
    assert shorter == alone


def _settings(**schedule: object) -> MicrocompactSettings:
    import middleware
    from middleware.policy.settings import bind

    overrides = {"microcompact": {"schedule": schedule}}
    return bind(
        middleware.load_policy(env={}, dotenv_path=False, overrides=overrides), MicrocompactSettings
    )


@settings(max_examples=300)
@given(history(), st.data())
def test_a_move_made_on_a_cold_cache_is_made_again_from_its_record(
    drawn: tuple[list[int], list[int], list[Gain]], data: st.DataObject
) -> None:
    """A request that finds the cache cold may move to its latest candidate for free; a
    later request told of that move decides alike whether it starts from scratch (a
    restart) or from the earlier request's decisions, and a session without the record
    decides as if it had never been cold."""
    node_turns, sizes, items = drawn
    step = data.draw(st.integers(1, 3))
    s = _settings(
        step_turns=step,
        trigger_tokens=data.draw(st.sampled_from([0, 5_000])),
        min_reclaim_tokens=50,
    )
    ages = (s.truncate_turns, s.summarize_turns, s.inputs.clear_turns)
    turns = node_turns[-1] + 1
    earlier = data.draw(st.integers(1, turns))
    cut = node_turns.index(earlier - 1) + 2 if earlier < turns else len(node_turns)
    before = [g for g in items if g.node < cut]
    table = TurnGains(weighed_at(before, earlier, *ages), earlier, *ages)
    warm = boundary(s, table, sizes[:cut], node_turns[:cut], earlier)
    cold = boundary(s, table, sizes[:cut], node_turns[:cut], earlier, cold=ColdCache(now=True))
    assert warm.cold is None
    if cold.cold is None:  # nothing to gain at the latest candidate
        assert cold == warm
        return
    event("moved on a cold cache")
    assert cold.turn == cold.cold == earlier // step * step > warm.turn
    assert cold.cold in cold.decided.cold or cold.decided.until == cold.cold
    recorded = ColdCache(moved=frozenset({cold.cold}))
    table = TurnGains(weighed_at(items, turns, *ages), turns, *ages)
    alone = boundary(s, table, sizes, node_turns, turns, cold=recorded)
    assert alone.cold is None  # nothing new to record
    assert cold.cold in alone.decided.moves or alone.decided.until <= cold.cold
    carried = boundary(s, table, sizes, node_turns, turns, decided=cold.decided, cold=recorded)
    assert carried == alone


def test_a_cold_cache_pays_for_a_move_the_warm_one_does_not() -> None:
    """Ten turns of 10,000-character results, each compacted to save 2,000: rewriting
    the history after turn 0 costs more than that repays in a warm cache, and nothing in
    a cold one (or with no cache at all)."""
    s = _settings(step_turns=5, trigger_tokens=0, min_reclaim_tokens=100)
    node_turns = [-1] + [turn for turn in range(10) for _ in (0, 1)]
    sizes = [1_000] + [200, 10_000] * 10
    items = [Gain(turn, 2 + 2 * turn, 2_000, 2_000) for turn in range(10)]
    ages = (s.truncate_turns, s.summarize_turns, s.inputs.clear_turns)
    table = TurnGains(items, 10, *ages)
    warm = boundary(s, table, sizes, node_turns, 10)
    assert warm.turn == 0 and warm.cold is None
    cold = boundary(s, table, sizes, node_turns, 10, cold=ColdCache(now=True))
    assert cold.turn == cold.cold == 10
    uncached = boundary(s, table, sizes, node_turns, 10, cold=ColdCache(none=True))
    assert uncached.turn == 10 and uncached.cold is None  # the policy says it: no record
    assert uncached.decided.moves == (5,)  # and 10, not decided for good yet
    # The record replays the move.
    recorded = ColdCache(moved=frozenset({10}))
    assert boundary(s, table, sizes, node_turns, 10, cold=recorded).turn == 10


def compacted_at(
    items: list[Gain], sizes: list[int], at: int, ages: tuple[int, int, int]
) -> tuple[list[Gain], list[int]]:
    """The gains and message sizes of the history compaction at boundary ``at`` gives: a
    compacted message is smaller by what was removed, and a result truncated there can
    still be summarised (microcompact/weighing.py weighs the text as it stands)."""
    sizes = list(sizes)
    left = []
    for gain in items:
        sizes[gain.node] -= removed(gain, at, *ages)
        reached = level(gain, at, *ages)
        if reached == 0:
            left.append(gain)
        elif reached == 1 and not gain.cleared:
            left.append(gain._replace(truncated=0, summarized=gain.summarized - gain.truncated))
    return left, sizes


@settings(max_examples=300)
@given(history(), st.data())
def test_the_compacted_history_moves_the_boundary_no_further(
    drawn: tuple[list[int], list[int], list[Gain]], data: st.DataObject
) -> None:
    """Processing the output again changes nothing: the history compacted at a boundary
    never finds a later one worth moving to, since a move is weighed against what it
    re-sends as the current boundary left it (compacted), not as it came."""
    node_turns, sizes, items = drawn
    items = [g._replace(summarized=max(g.summarized, g.truncated)) for g in items]
    for gain in items:  # what compaction removes is in the message
        sizes[gain.node] = max(sizes[gain.node], gain.truncated, gain.summarized, gain.cleared)
    step = data.draw(st.integers(1, 3))
    s = _settings(
        step_turns=step,
        trigger_tokens=data.draw(st.sampled_from([0, 5_000])),
        min_reclaim_tokens=50,
        rewrite_cost=data.draw(st.sampled_from([2, 11.5])),
        min_reclaim_ratio=data.draw(st.sampled_from([0, 0.3, 0.5])),
    )
    ages = (s.truncate_turns, s.summarize_turns, s.inputs.clear_turns)
    turns = node_turns[-1] + 1
    first = boundary(s, TurnGains(items, turns, *ages), sizes, node_turns, turns)
    event("moved" if first.turn else "not moved")
    left, smaller = compacted_at(items, sizes, first.turn, ages)
    again = boundary(s, TurnGains(left, turns, *ages), smaller, node_turns, turns)
    assert again.turn <= first.turn


def test_no_rewrite_is_bet_on_more_than_expected_turns_max() -> None:
    """Sixty turns in, one old 40,000-character result whose compaction saves 32,000 and
    re-sends 78,800 uncached (a ratio of 0.41): a session that has lasted 60 turns is
    expected to last 30 more, which would pay for it (11.5 / 31 = 0.37), but
    ``expected_turns_max`` bets on 22 at most (11.5 / 23 = 0.5): no move."""
    node_turns = [-1] + [turn for turn in range(60) for _ in (0, 1)]
    sizes = [1_000] + [200, 1_000] * 60
    sizes[2] = 40_000
    items = [Gain(0, 2, 32_000, 32_000)]
    unbounded = _settings(step_turns=60, expected_turns_max=1_000)
    ages = (unbounded.truncate_turns, unbounded.summarize_turns, unbounded.inputs.clear_turns)
    table = TurnGains(items, 60, *ages)
    rewritten = sum(sizes) - sum(sizes[:2]) - 32_000
    assert 11.5 / 31 < 32_000 / rewritten < 11.5 / 23
    assert boundary(unbounded, table, sizes, node_turns, 60).turn == 60
    bounded = _settings(step_turns=60)
    assert bounded.expected_turns_max == 22  # the default
    assert boundary(bounded, table, sizes, node_turns, 60).turn == 0
