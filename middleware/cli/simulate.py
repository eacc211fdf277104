"""``chatcli-mw simulate``: replay recorded sessions under policies and compare costs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from middleware.cli.common import add_command
from middleware.cli.plotting import pyplot
from middleware.cli.simulate_views import plot, render_sessions, render_table
from middleware.plugin.host import PluginHost
from middleware.policy import load_policy
from middleware.policy.resources import data_dir, preset_names
from middleware.replay.costs import PRICING, approximate_tokens
from middleware.replay.simulate import PolicySpec, simulate
from middleware.replay.transcripts import READS, SUFFIXES, read_transcripts

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
            "chatcli-mw simulate ~/.codex/sessions --pricing openai-gpt-5",
            "chatcli-mw simulate run.traj --policy mine=prod.yaml --presets --json",
            "chatcli-mw simulate session.jsonl --pricing openai-gpt-5 --plot cost.png",
        ],
    )
    sim.add_argument(
        "transcripts",
        metavar="TRANSCRIPT",
        nargs="+",
        help=f"a recorded session ({READS}), or a folder: the files under it named "
        f"{', '.join('*' + suffix for suffix in SUFFIXES)}, those that are none skipped "
        "and named",
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
        help="also compare the shipped presets (chatcli, claude-code, ethos, hermes, lean, pi)",
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
        help="draw request size and cumulative effective cost per model call (needs the "
        "[plot] extra)",
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
    transcripts, skipped = read_transcripts(args.transcripts)
    specs = policy_specs(args.policy, args.baselines, args.presets)
    total = sum(t.request_count for t in transcripts) * len(specs)
    with tqdm(total=total, unit="request", file=sys.stderr, disable=None, leave=False) as bar:

        def advance(requests: int) -> None:
            bar.update(requests)

        counter = PluginHost.create().token_counter(approximate_tokens)
        summaries = simulate(
            transcripts,
            specs,
            PRICING[args.pricing],
            window=args.window,
            count_tokens=counter,
            progress=advance,
            readback_factor=args.readback_factor,
            clock=not args.no_clock,
        )
    if args.json:
        print(
            json.dumps(
                {
                    "pricing": args.pricing,
                    "cache_lifetime_seconds": PRICING[args.pricing].lifetime,
                    "clock": not args.no_clock,
                    "window": args.window,
                    "transcripts": [t.name for t in transcripts],
                    "skipped": skipped,
                    "policies": [s.to_dict() for s in summaries],
                },
                indent=2,
            )
        )
    else:
        notes = [f"{t.name}: {note}" for t in transcripts for note in t.notes]
        notes += [f"skipped {file}: {reason}" for file, reason in skipped.items()]
        clock = "no clock" if args.no_clock else "the recorded clock"
        print(
            render_table(
                summaries, len(transcripts), f"{args.pricing} ({clock})", args.window, notes
            )
        )
        if args.per_session:
            print()
            print(render_sessions(summaries))
    if args.plot:
        sys.stderr.write(f"{args.plot}: {plot(summaries, Path(args.plot))}\n")
    return 0
