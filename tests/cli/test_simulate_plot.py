"""`simulate --plot` draws what the table ranks by (issue 35, item 5): each session's
cumulative effective cost as a share of its cost without middleware, against the model
call on whole-number ticks, a policy equal to `none` visible over it, and a panel whose
source has no clock saying so. Read from the drawn figure's data, not its pixels."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from locations import REPO

from middleware.cli.plotting import over_baseline, style
from middleware.cli.simulate_views import COST_UNIT, draw
from middleware.replay.costs import PRICING
from middleware.replay.simulate import PolicySpec, simulate
from middleware.replay.summaries import PolicySummary
from middleware.replay.transcripts import Transcript

pytest.importorskip("matplotlib")


def session(answers: list[str]) -> list[dict[str, Any]]:
    """A long output whose middle holds ``secret_fn_42`` (a command's: a file read may
    be bounded by its tool alone), then one answer per entry of ``answers``, each with a
    small Bash call and its output."""
    middle = "def secret_fn_42():\n"
    text = "".join(f"line {i} plain words\n" for i in range(400)) + middle
    text += "".join(f"more plain words {i}\n" for i in range(400))
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "look around"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "r1", "name": "Bash", "input": {"c": "cat a.py"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "r1", "content": text}]},
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
    return [*messages, {"role": "assistant", "content": "done"}]


@pytest.fixture(scope="module")
def summaries(tmp_path_factory: pytest.TempPathFactory) -> list[PolicySummary]:
    """Three sessions: one with times (its second answer names what the cut hid), one
    without, one of a single call; under a 2,000-character cut and a policy that does
    nothing."""
    cut = tmp_path_factory.mktemp("policies") / "cut.yaml"
    cut.write_text(
        "version: 1\nname: cut\nbudget:\n  max_result_chars: 2000\n  preview:\n"
        "    outline_chars: 0\nmicrocompact:\n  enabled: false\n",
        encoding="utf-8",
    )
    timed = session(["plain", "call secret_fn_42", "plain"])
    untimed = session(["plain", "plain"])
    transcripts = [
        Transcript("timed", "json", "anthropic", timed,
                   message_times=tuple(10.0 * i for i in range(len(timed)))),
        Transcript("untimed", "json", "anthropic", untimed),
        Transcript("one-call", "json", "anthropic", [
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]),
    ]  # fmt: skip
    nothing = REPO / "policies" / "baselines" / "none.yaml"
    specs = [PolicySpec("cut", str(cut)), PolicySpec("off", str(nothing))]
    return simulate(transcripts, specs, PRICING["anthropic-5m"])


@pytest.fixture(scope="module")
def figure(summaries: list[PolicySummary]) -> Iterator[Any]:
    from matplotlib import pyplot as plt

    drawn, said = draw(summaries)
    assert said == "3 of 3 sessions drawn, those with the most model calls"
    drawn.canvas.draw()  # ticks and their labels as they are drawn
    yield drawn
    plt.close(drawn)


def panels(figure: Any) -> dict[str, tuple[Any, Any]]:
    """Each row's (size, cost) axes, by session."""
    axes = figure.axes
    rows = [(axes[i], axes[i + 1]) for i in range(0, len(axes), 2)]
    return {size.get_title().split(":")[0]: (size, cost) for size, cost in rows}


def lines(ax: Any) -> dict[str, Any]:
    return {line.get_label(): line for line in ax.get_lines()}


def test_the_cost_panel_is_the_cumulative_effective_cost_share_the_table_ranks_by(
    figure: Any, summaries: list[PolicySummary]
) -> None:
    _, cut, _ = summaries
    assert figure.get_suptitle().endswith(COST_UNIT)
    for name, (_, cost) in panels(figure).items():
        assert cost.get_title().startswith("cumulative effective cost")
        assert "share of the session's cost" in cost.get_ylabel()
        drawn = lines(cost)
        assert list(drawn) == ["none", "cut", "off"]
        assert drawn["none"].get_ydata()[-1] == pytest.approx(1.0)
        session = cut.sessions[name].to_dict()
        final = drawn["cut"].get_ydata()[-1]
        assert final == pytest.approx(session["relative_effective_cost"], abs=1e-4)
    # The cut hid secret_fn_42 when the second answer named it: its read-back is charged
    # at that request (the third: before the read, before each answer), not spread.
    _, cost = panels(figure)["timed"]
    raw = summaries[0].series["timed"].costs[-1]
    series = cut.series["timed"]
    read_backs = [e * raw - c for e, c in zip(cost_of(cost, "cut"), series.costs, strict=True)]
    charge = cut.sessions["timed"].readback_cost
    assert charge > 0
    assert read_backs == pytest.approx([0, 0, charge, charge, charge])
    figures = cut.sessions["timed"].to_dict()
    assert figures["relative_effective_cost"] > figures["relative_cost"]


def cost_of(ax: Any, policy: str) -> list[float]:
    return [float(y) for y in lines(ax)[policy].get_ydata()]


def test_model_calls_have_whole_number_ticks(figure: Any) -> None:
    for size, cost in panels(figure).values():
        assert all(float(tick).is_integer() for tick in size.get_yticks())  # tokens
        for ax in (size, cost):
            assert ax.get_xlabel() == "model call"
            assert all(float(tick).is_integer() for tick in ax.get_xticks())
            calls = list(lines(ax)["none"].get_xdata())
            assert calls == list(range(1, len(calls) + 1))
    size, cost = panels(figure)["one-call"]  # matplotlib alone ticks 0.945, 0.96...
    low, high = size.get_xlim()
    assert [t for t in size.get_xticks() if low <= t <= high] == [1]
    assert lines(size)["none"].get_marker() == "o"  # one point: a line would not show


def test_a_policy_equal_to_none_is_drawn_over_it_and_named(figure: Any) -> None:
    # The cut changes the sessions whose read it cuts, not the one of a single call.
    same = {"timed": "= none: off", "untimed": "= none: off", "one-call": "= none: cut, off"}
    for name, (size, cost) in panels(figure).items():
        for ax in (size, cost):
            drawn = lines(ax)
            assert list(drawn["off"].get_ydata()) == list(drawn["none"].get_ydata())
            assert drawn["off"].get_zorder() > drawn["none"].get_zorder()
            assert [text.get_text() for text in ax.texts] == [same[name]]
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert legend == ["none", "cut", "off (= none in every panel)"]


def test_series_equal_to_the_baseline_take_turns_with_its_dashes() -> None:
    """Each of the baseline and the series equal to it is dashed one dash in turn: the
    same period, every offset apart."""
    for count in (1, 2, 3):
        looks = [over_baseline(style(0, baseline=True), 0, count)]
        looks += [over_baseline(style(i), i + 1, count) for i in range(count)]
        patterns = [look["linestyle"] for look in looks]
        assert {dashes for _, dashes in patterns} == {(4.0, 4.0 * count)}
        assert len({offset for offset, _ in patterns}) == count + 1
        assert all(look["zorder"] > looks[0]["zorder"] for look in looks[1:])
    assert style(0, baseline=True)["linestyle"] == (0.0, (4.0, 4.0))


def test_a_source_without_a_clock_says_so_where_the_clock_prices(figure: Any) -> None:
    drawn = panels(figure)
    assert "no timestamps" in drawn["untimed"][1].get_title()
    assert "no timestamps" not in drawn["untimed"][0].get_title()  # sizes need no clock
    assert "no timestamps" not in drawn["timed"][1].get_title()


def test_without_the_clock_a_timed_source_says_it_was_ignored() -> None:
    from matplotlib import pyplot as plt

    timed = Transcript(
        "timed",
        "json",
        "anthropic",
        session(["plain"]),
        message_times=(0.0, 1.0, 2.0, 3.0, 4.0, 5.0),
    )
    clockless = simulate([timed], [], PRICING["anthropic-5m"], clock=False)
    drawn, _ = draw(clockless)
    try:
        assert "--no-clock" in drawn.axes[1].get_title()
    finally:
        plt.close(drawn)
