"""What ``chatcli-mw simulate`` prints and draws: the table of the policies compared, each
session's line (``--per-session``), and the figure of request sizes and cumulative
effective cost (``--plot``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from middleware.cli.plotting import integer_ticks, over_baseline, pyplot, style, thousands
from middleware.replay.summaries import PolicySummary, SessionSeries


def render_table(
    summaries: list[PolicySummary], sessions: int, pricing: str, window: int, notes: list[str]
) -> str:
    head = (
        f"{sessions} session(s), {summaries[0].requests} requests, pricing {pricing}, "
        f"window {window:,} tokens"
    )
    if summaries[0].expired:
        expired = summaries[0].expired
        head += f"; {expired} request{'s' * (expired != 1)} found the cache expired"
    columns = (
        "policy",
        "cost",
        "effective",
        "cache hit",
        "peak tokens",
        "over window",
        "spilled chars",
        "compacted chars",
        "added chars",
        "recent kept",
        "refs",
        "hidden",
        "quotes",
        "quoted hidden",
        "re-reads",
    )
    rows = [columns]
    for s in summaries:
        rows.append(
            (
                s.name,
                f"{s.relative_cost:.3f}",
                f"{s.relative_effective_cost:.3f}",
                f"{s.cache_hit_ratio:.1%}",
                f"{s.peak_tokens:,}",
                str(s.over_window),
                f"{s.chars_spilled:,}",
                f"{s.chars_compacted:,}",
                f"{s.chars_added:,}",
                "yes" if s.recent_compacted == 0 else f"no ({s.recent_compacted})",
                str(s.references),
                f"{s.hidden} ({s.hidden_rate:.1%})",
                str(s.quotes),
                f"{s.quotes_hidden} ({s.quotes_hidden_rate:.1%})",
                str(sum(s.rereads.values())),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = [head, ""]
    for row in rows:
        cells = zip(row, widths, strict=True)
        lines.append(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(cells))
        )
    lines += [
        "",
        "cost: relative to no middleware; effective: cost plus reading each hidden result "
        "back once per session; recent kept: the last two turns' results reached the model "
        "uncompacted; hidden: references the policy removed (distinctive tokens of the "
        "next answer first seen in a tool result); quotes: lines the next answer's tool "
        "inputs copy from an earlier result, quoted hidden: those the policy removed (a "
        "measure that shares no code with what summaries keep); re-reads: edits quoting a "
        "removed line, which must read the file again (charged in effective)",
    ]
    causes = [s for s in summaries if s.hidden_by]
    for s in causes:
        listed = ", ".join(f"{cause} {n}" for cause, n in sorted(s.hidden_by.items()))
        lines.append(f"hidden by ({s.name}): {listed}")
    for s in summaries:
        if s.quotes_hidden_by:
            listed = by_cause_and_tool(s.quotes_hidden_by)
            lines.append(f"quotes hidden ({s.name}), by cause and tool: {listed}")
    for s in summaries:
        if s.rereads:
            listed = ", ".join(f"{tool} {n}" for tool, n in sorted(s.rereads.items()))
            lines.append(f"re-reads ({s.name}), by the tool that gave the text: {listed}")
    lines += [f"note: {note}" for note in notes]
    return "\n".join(lines)


def by_cause_and_tool(by: dict[str, dict[str, int]]) -> str:
    """``cause tool count`` for each pair of a cause -> tool -> count table, the most
    frequent first (``microcompact:summarized Read 120, budget:spilled Read 40``)."""
    pairs = [(n, cause, tool) for cause, tools in by.items() for tool, n in tools.items()]
    pairs.sort(key=lambda pair: (-pair[0], pair[1], pair[2]))
    return ", ".join(f"{cause} {tool} {n}" for n, cause, tool in pairs)


def render_sessions(summaries: list[PolicySummary]) -> str:
    """One line per session and policy: cost, effective cost, hidden references and
    quotes, forced re-reads, and the hidden quotes by cause and tool (last: its width
    varies)."""
    lines = [
        f"{'session':45} {'policy':28} {'cost':>6} {'effective':>9} {'hidden':>12} "
        f"{'quoted hidden':>13} {'re-reads':>8}  quoted hidden by cause and tool"
    ]
    for s in summaries[1:]:
        for name, figures in s.sessions.items():
            row = figures.to_dict()
            hidden = f"{figures.hidden}/{figures.references}"
            quotes = f"{figures.quotes_hidden}/{figures.quotes}"
            line = (
                f"{name[:45]:45} {s.name[:28]:28} {row['relative_cost']:>6.3f} "
                f"{row['relative_effective_cost']:>9.3f} {hidden:>12} {quotes:>13} "
                f"{figures.rereads:>8}"
            )
            if figures.quotes_hidden_by:
                line += f"  {by_cause_and_tool(figures.quotes_hidden_by)}"
            lines.append(line)
    return "\n".join(lines)


#: What the cost panels draw, in words (the figure's title says it under what was drawn).
COST_UNIT = (
    "right-hand panels: cumulative effective cost (the table's 'effective': cost with prompt\n"
    "caching plus reading hidden results back, at the call that misses them), as a share of\n"
    "the session's cost without middleware"
)


def plot(summaries: list[PolicySummary], path: Path, sessions_shown: int = 6) -> str:
    """Draw :func:`draw`'s figure into ``path``; returns the line that says what was drawn
    and what was left out."""
    plt = pyplot()
    figure, said = draw(summaries, sessions_shown)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return said


def draw(summaries: list[PolicySummary], sessions_shown: int = 6) -> tuple[Any, str]:
    """Context size per call and cumulative effective cost of each policy (what the table
    ranks by), one row per session, for the ``sessions_shown`` sessions with the most
    calls; returns the figure and the line that says what was drawn and what was left out
    (also the figure's title, above :data:`COST_UNIT`).

    A policy whose series is the baseline's exactly is drawn in the baseline's gaps and
    named in the panel (``= none: NAME``); the cost panel of a session whose source has no
    timestamps says so (its cache never expired)."""
    plt = pyplot()
    from matplotlib.lines import Line2D  # noqa: PLC0415 - optional extra

    baseline = summaries[0]
    by_length = sorted(baseline.series, key=lambda n: -len(baseline.series[n].tokens))
    sessions = by_length[:sessions_shown]
    left = len(by_length) - len(sessions)
    said = (
        f"{len(sessions)} of {len(by_length)} sessions drawn, those with the most model "
        f"calls" + (f"; {left} left out (all are in the table)" if left else "")
    )
    figure, axes = plt.subplots(
        len(sessions), 2, figsize=(12, 3.2 * len(sessions) + 1.9), squeeze=False
    )
    # Policies equal to no middleware in every panel drawn (said in the legend too).
    same_everywhere = {summary.name for summary in summaries[1:]}
    for row, name in enumerate(sessions):
        size_ax, cost_ax = axes[row]
        raw = baseline.series[name]
        total = (raw.costs[-1] if raw.costs else 0.0) or 1.0
        sizes = [[float(t) for t in s.series[name].tokens] for s in summaries]
        costs = [[cost / total for cost in s.series[name].effective] for s in summaries]
        for ax, lines in ((size_ax, sizes), (cost_ax, costs)):
            same = _draw_panel(ax, summaries, lines)
            same_everywhere &= set(same)
            integer_ticks(ax.xaxis)
            ax.set_xlabel("model call")
        thousands(size_ax.yaxis)
        integer_ticks(size_ax.yaxis)
        size_ax.set_title(f"{name}: request size", fontsize=9)
        size_ax.set_ylabel("tokens", fontsize=8)
        cost_ax.set_title(f"cumulative effective cost{_clock_note(raw)}", fontsize=9)
        cost_ax.set_ylabel("share of the session's cost\nwithout middleware", fontsize=8)
    handles = [
        Line2D([], [], **style(index - 1, baseline=index == 0)) for index in range(len(summaries))
    ]
    labels = [s.name + " (= none in every panel)" * (s.name in same_everywhere) for s in summaries]
    columns = min(len(labels), 4)
    legend_rows = -(-len(labels) // columns)
    figure.legend(handles, labels, loc="lower center", ncol=columns, fontsize=8, frameon=False)
    figure.suptitle(f"{said}\n{COST_UNIT}", fontsize=9)
    height = figure.get_figheight()
    # Room for the title above and the legend below the panels (in figure fractions).
    figure.tight_layout(rect=(0, (0.1 + 0.2 * legend_rows) / height, 1, 1 - 0.8 / height))
    return figure, said


def _draw_panel(ax: Any, summaries: list[PolicySummary], lines: list[list[float]]) -> list[str]:
    """Each policy's line (one point per model call, the baseline's first); the policies
    equal to the baseline are drawn over it, taking turns with its dashes, and named in
    the panel. Returns their names."""
    same = [index for index in range(1, len(lines)) if lines[index] == lines[0]]
    for index, (summary, points) in enumerate(zip(summaries, lines, strict=True)):
        look = style(index - 1, baseline=index == 0)
        if same and (index == 0 or index in same):
            look = over_baseline(look, same.index(index) + 1 if index else 0, len(same))
        if len(points) == 1:  # a line of one point draws nothing
            look["marker"] = "o"
        ax.plot(range(1, len(points) + 1), points, label=summary.name, **look)
    ax.set_xlim(0.5, max(len(points) for points in lines) + 0.5)
    names = [summaries[index].name for index in same]
    if names:
        ax.text(
            0.01, 0.97, "= none: " + ", ".join(names), transform=ax.transAxes, va="top", fontsize=7
        )
    return names


def _clock_note(series: SessionSeries) -> str:
    """What a cost panel's title adds when no clock priced the cache's expiry."""
    if not series.timestamps:
        return " (no timestamps: the cache never expires)"
    if not series.clock:
        return " (--no-clock: the cache never expires)"
    return ""
