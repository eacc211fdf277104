"""``chatcli-mw``: clean histories, check them, inspect policies and plugins, simulate costs.

Each subcommand is one ``add_<name>(commands)`` function in :data:`COMMANDS`: it adds its
subparser and binds its handler with ``set_defaults(run=handler)``; a handler takes the parsed
arguments and returns the exit status. Commands live one group per module (``history``,
``policy``, ``plugins``, ``simulate``, ``serve``, ``spill``, ``ledger``); to add one, write such a
function in the module of its group (or a new module) and append it to :data:`COMMANDS`. A
handler raises :class:`~middleware.errors.MiddlewareError` (or lets an ``OSError`` through)
for bad input; :func:`main` turns it into one ``chatcli-mw: error: FILE: problem`` line and
exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from middleware import __version__
from middleware.cli.history import add_check, add_process
from middleware.cli.ledger import add_ledger
from middleware.cli.plugins import add_plugins
from middleware.cli.policy import add_config, add_schema, add_validate
from middleware.cli.serve import add_serve
from middleware.cli.simulate import add_simulate
from middleware.cli.spill import add_gc, add_recall
from middleware.errors import InputError, MiddlewareError

if TYPE_CHECKING:
    from middleware.cli.common import Subcommands

EPILOG = """\
examples:
  chatcli-mw process session.json                  clean a history with the default policy
  chatcli-mw process body.json --policy prod.yaml -o clean.json --report json
  chatcli-mw check session.json                    list pairing problems (exit 1 if any)
  chatcli-mw validate policies/*.yaml              check policy files for CI
  chatcli-mw config --policy prod.yaml --show-origin
  chatcli-mw schema --path                         where editors find the policy schema
  chatcli-mw serve                                 the proxy: ANTHROPIC_BASE_URL=http://127.0.0.1:8787
  chatcli-mw recall s1/toolu_01-9f2c4e1a7b3d5c6e.txt --limit 100   a spilled output, from any store
  chatcli-mw gc --older-than 7d                    remove the spill folders of idle sessions
  chatcli-mw ledger                                what sessions were billed, and would have cost
  chatcli-mw plugins
  chatcli-mw simulate session.jsonl --policy preset:chatcli --plot cost.png
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.run(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`chatcli-mw config | head`): not an error of ours. Point
        # stdout at devnull so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # what a shell reports for a command killed by SIGPIPE
    except (MiddlewareError, OSError) as exc:
        where = f"{args.file}: " if getattr(args, "file", None) else ""
        if isinstance(exc, InputError) and exc.source is not None:
            where = f"{exc.source}: "
        sys.stderr.write(f"chatcli-mw: error: {where}{exc}\n")
        return 2
    return result


def build_parser() -> argparse.ArgumentParser:
    """The ``chatcli-mw`` parser, with one subcommand per entry of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="chatcli-mw",
        description="Clean an LLM agent's conversation history before each model call: "
        "pairing repair, result budgets with lossless spill, cache-aware microcompaction.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"chatcli-mw {__version__}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")
    for add_command in COMMANDS:
        add_command(commands)
    return parser


#: The subcommands, in the order ``--help`` lists them.
COMMANDS: tuple[Callable[[Subcommands], None], ...] = (
    add_process,
    add_check,
    add_validate,
    add_config,
    add_schema,
    add_plugins,
    add_simulate,
    add_serve,
    add_recall,
    add_gc,
    add_ledger,
)
