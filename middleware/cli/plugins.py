"""``chatcli-mw plugins``: the plugins loaded, their hooks, and what bounds a tool."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from middleware.cli.common import add_command
from middleware.pipeline import Pipeline
from middleware.plugin.host import PluginHost
from middleware.policy import load_policy
from middleware.report import ProblemReport
from middleware.steps.budget.line_rules import line_rule

if TYPE_CHECKING:
    from middleware.cli.common import Subcommands


def add_plugins(commands: Subcommands) -> None:
    plugins = add_command(
        commands,
        "plugins",
        summary="list the loaded plugins and their hooks",
        description="List the plugins loaded (built-in ones and entry points, subject to "
        "CHATCLI_LOAD_PLUGINS and CHATCLI_BLOCK_PLUGINS) with the hooks each implements, and "
        "those that failed to load. With --tool, say what bounds that tool's results.",
        examples=[
            "chatcli-mw plugins",
            "chatcli-mw plugins --tool read --tool sql_query --policy prod.yaml",
            "CHATCLI_LOAD_PLUGINS= chatcli-mw plugins --json",
        ],
    )
    plugins.add_argument("--json", action="store_true", help="print JSON")
    plugins.add_argument(
        "--tool",
        action="append",
        default=[],
        metavar="NAME",
        help="also show which plugin declares a cap for this tool, and the cap in effect "
        "under the policy (repeatable)",
    )
    plugins.add_argument(
        "--policy", help="policy file or preset:NAME (default: $CHATCLI_POLICY, else embedded)"
    )
    plugins.set_defaults(run=_plugins)


def _plugins(args: argparse.Namespace) -> int:
    host = PluginHost.create()
    infos = host.plugins()
    problems: list[ProblemReport] = []
    caps = {tool: host.tool_result_cap(tool, problems) for tool in args.tool}
    policy = load_policy(args.policy)
    with Pipeline(policy, host=host) as pipe:
        effect = {tool: _cap_in_effect(pipe, tool) for tool in args.tool}
    if args.json:
        listing: dict[str, Any] = {"plugins": [info.__dict__ for info in infos]}
        listing["tool_caps"] = {
            tool: None
            if d is None
            else {"plugin": d.plugin, "max_chars": d.cap.max_chars, "exempt": d.cap.exempt}
            for tool, d in caps.items()
        }
        listing["in_effect"] = {"policy": policy.name, **effect}
        print(json.dumps(listing, indent=2))
    else:
        for info in infos:
            origin = "built-in" if info.builtin else f"{info.distribution} {info.version}"
            print(f"{info.name} ({origin}): {', '.join(info.hooks)}")
        for tool, declared in caps.items():
            if declared is None:
                print(f"tool {tool}: no plugin declares a cap")
                continue
            what = (
                "exempt"
                if declared.cap.exempt
                else (
                    f"{declared.cap.max_chars:,} chars"
                    if declared.cap.max_chars
                    else "the per-tool default"
                )
            )
            print(f"tool {tool}: {what}, declared by {declared.plugin}")
        for tool, cap in effect.items():
            print(f"tool {tool} under policy {policy.name}: {cap}")
    for problem in [*host.load_problems, *problems]:
        print(f"could not load plugin {problem.plugin}: {problem.message}", file=sys.stderr)
    return 0


def _cap_in_effect(pipe: Pipeline, tool: str) -> str:
    """What bounds one result of ``tool`` alone in a turn: a line rule or a cap."""
    rule = line_rule(pipe.policy, tool)
    if rule is not None:
        return (
            f"line rule {rule.keep}: {rule.limits.max_lines:,} lines or "
            f"{rule.limits.max_bytes:,} bytes"
            + (f", {rule.max_items:,} {rule.noun}" if rule.max_items else "")
        )
    cap = pipe.result_cap(tool)
    limit = "not cut" if cap.max_chars is None else f"{cap.max_chars:,} chars"
    return f"{limit} ({cap.source})"
