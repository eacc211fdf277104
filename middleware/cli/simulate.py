"""``chatcli-mw simulate``: replay recorded sessions under policies and compare costs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from middleware.cli.common import add_command
from middleware.cli.plotting import pyplot, style, thousands
from middleware.plugin.host import PluginHost
from middleware.policy import load_policy
from middleware.policy.resources import data_dir, preset_names
from middleware.replay.costs import PRICING, approximate_tokens
from middleware.replay.simulate import PolicySpec, PolicySummary, simulate
from middleware.replay.transcripts import load_transcripts

if TYPE_CHECKING:
    from middleware.cli.common import Subcommands


def add_simulate(commands: Subcommands) -> None:
    sim = add_command(
        commands,
        "simulate",
        summary="replay recorded sessions under policies and compare their cost",
        description="Replay each request of recorded sessions through each policy and charge "
        "it with prompt caching. Costs are relative to no middleware ('none'); 'hidden' is "
        "the share of the references the model's next answer makes to tool output that the "
        "policy removed from the request.",
        examples=[
            "chatcli-mw simulate ~/.claude/projects/*/*.jsonl --baselines",
            "chatcli-mw simulate run.traj --policy mine=prod.yaml --presets --json",
            "chatcli-mw simulate session.jsonl --pricing openai-gpt-5 --plot cost.png",
        ],
    )
    sim.add_argument(
        "transcripts",
        metavar="TRANSCRIPT",
        nargs="+",
        help="Claude Code .jsonl, tau-bench .json, SWE-agent .traj, "
        "mini-swe-agent .traj.json, or a JSON message list or body",
    )
    sim.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="[NAME=]FILE",
        help="a policy to compare (repeatable); 'default': the embedded one",
    )
    sim.add_argument(
        "--baselines", action="store_true", help="also compare the shipped baseline policies"
    )
    sim.add_argument(
        "--presets",
        action="store_true",
        help="also compare the shipped presets (chatcli, claude-code, ethos, hermes, pi)",
    )
    sim.add_argument(
        "--pricing",
        choices=sorted(PRICING),
        default="anthropic-5m",
        help="prompt-cache prices to charge (default anthropic-5m)",
    )
    sim.add_argument(
        "--window",
        type=int,
        default=200_000,
        metavar="TOKENS",
        help="context window for the over-window count (default 200000)",
    )
    sim.add_argument(
        "--readback-factor",
        type=float,
        default=1.0,
        metavar="X",
        help="price of reading a hidden result back, as a multiple of the read-back model's "
        "(one more cached request plus the result written again; default 1, 0 for none)",
    )
    sim.add_argument(
        "--no-clock",
        action="store_true",
        help="ignore the transcripts' timestamps: the prompt cache never expires (by default "
        "a request sent longer than the pricing's cache lifetime after the previous one "
        "writes its whole prompt again)",
    )
    sim.add_argument(
        "--per-session",
        action="store_true",
        help="also print each session's cost, effective cost and hidden references",
    )
    sim.add_argument("--json", action="store_true", help="print JSON")
    sim.add_argument(
        "--plot",
        metavar="FILE.png",
        help="draw request size and cumulative cost (needs the [plot] extra)",
    )
    sim.set_defaults(run=run_simulate)


def policy_specs(values: list[str], baselines: bool, presets: bool = False) -> list[PolicySpec]:
    specs = []
    for value in values or ["default"]:
        name, _, path = value.rpartition("=")
        if value == "default":
            specs.append(PolicySpec("default", None))
            continue
        specs.append(PolicySpec(name or load_policy(path, env={}, dotenv_path=False).name, path))
    if baselines:
        for baseline in sorted((data_dir("policies") / "baselines").glob("*.yaml")):
            named = {spec.name for spec in specs}  # a baseline also given by --policy
            if baseline.stem != "none" and baseline.stem not in named:
                specs.append(PolicySpec(baseline.stem, str(baseline)))
    if presets:
        for name in preset_names():
            specs.append(PolicySpec(f"preset:{name}", f"preset:{name}"))
    return specs


def run_simulate(args: argparse.Namespace) -> int:
    if args.plot:
        pyplot()  # the extra is there before hours of replay, not after
    transcripts = [t for file in args.transcripts for t in load_transcripts(file)]
    specs = policy_specs(args.policy, args.baselines, args.presets)
    total = sum(t.request_count for t in transcripts) * len(specs)
    with tqdm(total=total, unit="request", file=sys.stderr, disable=None, leave=False) as bar:

        def advance(requests: int) -> None:
            bar.update(requests)

        counter = PluginHost.create().token_counter(approximate_tokens)
        summaries = simulate(
            transcripts, specs, PRICING[args.pricing], window=args.window,
            count_tokens=counter, progress=advance, readback_factor=args.readback_factor,
            clock=not args.no_clock,
        )  # fmt: skip
    if args.json:
        print(
            json.dumps(
                {
                    "pricing": args.pricing,
                    "cache_lifetime_seconds": PRICING[args.pricing].lifetime,
                    "clock": not args.no_clock,
                    "window": args.window,
                    "transcripts": [t.name for t in transcripts],
                    "policies": [s.to_dict() for s in summaries],
                },
                indent=2,
            )
        )
    else:
        notes = [f"{t.name}: {note}" for t in transcripts for note in t.notes]
        clock = "no clock" if args.no_clock else "the recorded clock"
        print(render_table(summaries, len(transcripts), f"{args.pricing} ({clock})",
                           args.window, notes))  # fmt: skip
        if args.per_session:
            print()
            print(render_sessions(summaries))
    if args.plot:
        sys.stderr.write(f"{args.plot}: {plot(summaries, Path(args.plot))}\n")
    return 0


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
    lines = [f"{'session':45} {'policy':28} {'cost':>6} {'effective':>9} {'hidden':>12} "
             f"{'quoted hidden':>13} {'re-reads':>8}  quoted hidden by cause and tool"]  # fmt: skip
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


def plot(summaries: list[PolicySummary], path: Path, sessions_shown: int = 6) -> str:
    """Context size per call and cumulative cost of each policy, one row per session, for
    the ``sessions_shown`` sessions with the most calls; returns the line that says what
    was drawn and what was left out (also the figure's title)."""
    plt = pyplot()
    by_length = sorted(summaries[0].series, key=lambda n: -len(summaries[0].series[n].tokens))
    sessions = by_length[:sessions_shown]
    left = len(by_length) - len(sessions)
    said = (f"{len(sessions)} of {len(by_length)} sessions drawn, those with the most model "
            f"calls" + (f"; {left} left out (all are in the table)" if left else ""))  # fmt: skip
    figure, axes = plt.subplots(
        len(sessions), 2, figsize=(12, 3.2 * len(sessions) + 1.2), squeeze=False
    )
    for row, name in enumerate(sessions):
        size_ax, cost_ax = axes[row]
        for index, summary in enumerate(summaries):
            look = style(index - 1, baseline=index == 0)
            series = summary.series[name]
            calls = range(1, len(series.tokens) + 1)
            size_ax.plot(calls, series.tokens, label=summary.name, **look)
            cost_ax.plot(calls, series.costs, label=summary.name, **look)
        thousands(size_ax.yaxis)
        thousands(cost_ax.yaxis)
        size_ax.set_title(f"{name}: request size", fontsize=9)
        size_ax.set_ylabel("tokens", fontsize=8)
        cost_ax.set_title(f"{name}: cumulative cost", fontsize=9)
        cost_ax.set_ylabel("base-input token prices", fontsize=8)
        size_ax.set_xlabel("model call")
        cost_ax.set_xlabel("model call")
    handles, labels = axes[0][0].get_legend_handles_labels()
    columns = min(len(labels), 4)
    legend_rows = -(-len(labels) // columns)
    figure.legend(handles, labels, loc="lower center", ncol=columns, fontsize=8, frameon=False)
    figure.suptitle(said, fontsize=10)
    height = figure.get_figheight()
    # Room for the title above and the legend below the panels (in figure fractions).
    figure.tight_layout(rect=(0, (0.1 + 0.2 * legend_rows) / height, 1, 1 - 0.35 / height))
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return said
