"""``chatcli-mw recall`` and ``gc``: read a spilled output back by the key its preview
names, and remove the session folders no session needs any more, from any store."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from middleware.cli.common import add_command
from middleware.errors import InputError
from middleware.policy import load_policy
from middleware.policy.settings import bind
from middleware.spill import SpillSettings, open_root
from middleware.spill.recall import recall
from middleware.spill.retention import collect, parse_age, utc
from middleware.steps.previews import human_size

if TYPE_CHECKING:
    from middleware.cli.common import Subcommands

POLICY_HELP = "policy file or preset:NAME whose spill section names the store (default: "
POLICY_HELP += "$CHATCLI_POLICY, else embedded)"


def add_recall(commands: Subcommands) -> None:
    recall_cmd = add_command(
        commands,
        "recall",
        summary="print a spilled output by the key its preview names",
        description="Print the full text of a result the budget step spilled, from any "
        "store: KEY is what the preview names (a local path, or the URL of an object such "
        "as s3://bucket/prefix/chatcli-agent-SESSION/tool-results/NAME), or SESSION/NAME in "
        "the policy's store (spill.url). Only what a spill store saved is read. --offset and "
        "--limit count lines, as an agent's file-reading tool does; when they leave lines "
        "out, stderr says which lines were printed.",
        examples=[
            "chatcli-mw recall /tmp/chatcli-agent-s1/tool-results/toolu_01-9f2c4e1a7b3d5c6e.txt",
            "chatcli-mw recall s3://team-spill/mw/chatcli-agent-s1/tool-results/call_7-"
            "0a1b2c3d4e5f6071.txt --offset 200 --limit 100",
            "CHATCLI_SPILL__URL=s3://team-spill/mw chatcli-mw recall "
            "s1/call_7-0a1b2c3d4e5f6071.txt",
        ],
    )
    recall_cmd.add_argument("key", metavar="KEY", help="what the preview names, or SESSION/NAME")
    recall_cmd.add_argument(
        "--offset", type=int, default=1, metavar="N", help="first line to print (1: the first)"
    )
    recall_cmd.add_argument("--limit", type=int, metavar="N", help="most lines to print")
    recall_cmd.add_argument("--policy", help=POLICY_HELP)
    recall_cmd.set_defaults(run=_recall)


def add_gc(commands: Subcommands) -> None:
    gc = add_command(
        commands,
        "gc",
        summary="remove spilled outputs no session needs any more",
        description="Remove the session folders of the policy's spill store (a local folder "
        "or an object store, spill.url) where nothing was written for --older-than, and "
        "only what a spill store wrote in them; a local workspace a running process holds "
        "is left alone, and so is an object-store session whose hold has not ended (a "
        "process serving it said until when it may still use it, by its own policy). The "
        "age must be longer than proxy.session_idle_seconds: a proxy still holding a "
        "session names its files.",
        examples=[
            "chatcli-mw gc --older-than 7d",
            "CHATCLI_SPILL__URL=s3://team-spill/mw chatcli-mw gc --older-than 14d --dry-run",
        ],
    )
    gc.add_argument(
        "--older-than",
        required=True,
        metavar="AGE",
        help="remove sessions idle this long: a number and s, m, h, d or w (7d)",
    )
    gc.add_argument("--dry-run", action="store_true", help="list what would go; remove nothing")
    gc.add_argument("--policy", help=POLICY_HELP)
    gc.set_defaults(run=_gc)


def _recall(args: argparse.Namespace) -> int:
    settings = bind(load_policy(args.policy), SpillSettings)
    recalled = recall(args.key, settings, offset=args.offset, limit=args.limit)
    sys.stdout.write(recalled.text)
    if recalled.first > 1 or recalled.last < recalled.total:
        more = f"; --offset {recalled.last + 1} for more" if recalled.last < recalled.total else ""
        sys.stderr.write(
            f"chatcli-mw: lines {recalled.first}-{recalled.last} of {recalled.total}{more}\n"
        )
    return 0


def _gc(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy)
    try:
        older_than = parse_age(args.older_than)
    except ValueError as exc:
        raise InputError(f"--older-than: {exc}") from exc
    idle = float(policy.get("proxy.session_idle_seconds"))
    if older_than <= idle:
        raise InputError(
            f"--older-than {args.older_than} is not longer than proxy.session_idle_seconds "
            f"({idle:g} s): a proxy may still hold such a session and name its files; give a "
            "longer age, or lower proxy.session_idle_seconds in the policy"
        )
    root = open_root(bind(policy, SpillSettings))
    done = collect(root, older_than, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for folder in done.removed:
        sys.stdout.write(
            f"{verb} {root.url}/{folder.name}: {folder.files} results, "
            f"{human_size(folder.size)}, last written {utc(folder.last_modified)}\n"
        )
    for folder in done.held:
        sys.stdout.write(
            f"kept {root.url}/{folder.name}: {folder.files} results, last written "
            f"{utc(folder.last_modified)}, held until {utc(folder.held_until)} by a process "
            "serving it\n"
        )
    total = sum(folder.size for folder in done.removed)
    held = f"; {len(done.held)} as old kept, held by a process serving them" if done.held else ""
    sys.stderr.write(
        f"chatcli-mw: {verb} {len(done.removed)} sessions ({human_size(total)}) idle for more "
        f"than {args.older_than} in {root.url}{held}\n"
    )
    return 0
