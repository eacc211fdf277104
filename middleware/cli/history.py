"""``chatcli-mw process`` and ``chatcli-mw check``: clean a history, or list what is
wrong with it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from middleware.cli.common import add_command, read_json, write_lines, write_output
from middleware.errors import InputError
from middleware.formats import FORMATS, jsonio
from middleware.formats.bodies import history_fields, read_body
from middleware.formats.check import check_history
from middleware.pipeline import Pipeline
from middleware.policy import load_policy
from middleware.session.decisions import Decision, DecisionLedger

if TYPE_CHECKING:
    from middleware.cli.common import Subcommands


def add_process(commands: Subcommands) -> None:
    process = add_command(
        commands,
        "process",
        summary="clean a history and write it back",
        description="Run pairing repair, budget enforcement and microcompaction on a JSON "
        f"history (a message list, or a request body with {history_fields()}, written back "
        "in the same shape). The cleaned history goes to stdout (or -o), a summary of what "
        "each step did to stderr; the full text of every cut result stays in the session's "
        "spill workspace. Exit 2 with one line on bad input.",
        examples=[
            "chatcli-mw process session.json > clean.json",
            "chatcli-mw process body.json --policy preset:claude-code -o clean.json",
            "chatcli-mw process - --format openai --report json < history.json",
            "chatcli-mw process s.json --session agent-7 --decisions agent-7.decisions.json",
        ],
    )
    process.add_argument(
        "file", metavar="FILE", help="a JSON history or request body (- for stdin)"
    )
    process.add_argument(
        "--policy", help="policy file or preset:NAME (default: $CHATCLI_POLICY, else embedded)"
    )
    process.add_argument(
        "--format", choices=FORMATS, default="auto", help="wire format (default: detect it)"
    )
    process.add_argument("-o", "--output", help="write the cleaned history here (default stdout)")
    process.add_argument(
        "--report",
        choices=("text", "json"),
        default="text",
        help="what to print on stderr: a summary (text) or the report (json)",
    )
    process.add_argument(
        "--session",
        default="cli",
        metavar="ID",
        help="spill workspace to use (default 'cli'): $TMPDIR/chatcli-agent-ID/tool-results, "
        "kept after the command so the previews' files stay readable; use one id per agent "
        "session",
    )
    process.add_argument(
        "--decisions",
        metavar="FILE",
        help="JSON file of frozen budget decisions: read if it exists, written after "
        "(keeps results as first sent across runs, e.g. with preset:claude-code)",
    )
    process.set_defaults(run=_process)


def add_check(commands: Subcommands) -> None:
    check = add_command(
        commands,
        "check",
        summary="list tool-call pairing problems (exit 1 if any)",
        description="Check a history against the provider's tool-pairing rules without "
        "changing it: one line per violation, in the provider's terms. Exit 0 when the "
        "history is paired correctly, 1 when it is not, 2 when it is not a history.",
        examples=[
            "chatcli-mw check session.json",
            "chatcli-mw check body.json --format responses",
        ],
    )
    check.add_argument("file", metavar="FILE", help="a JSON history or request body (- for stdin)")
    check.add_argument(
        "--format", choices=FORMATS, default="auto", help="wire format (default: detect it)"
    )
    check.set_defaults(run=_check)


def _process(args: argparse.Namespace) -> int:
    document = read_json(args.file)
    # The spill files are the command's output as much as the history is: keep them.
    policy = load_policy(args.policy, overrides={"spill.keep": True})
    decisions = _read_decisions(args.decisions)
    with Pipeline(policy, session_id=args.session, decisions=decisions) as pipe:
        result = pipe.process(document, format=args.format)
        if args.decisions:
            state = jsonio.dumps(pipe.decisions.export(), indent=1)
            jsonio.write_atomically(args.decisions, state + "\n")
    report_lines = result.report.summary_lines()
    path = next((a.detail["path"] for a in result.report.actions if "path" in a.detail), None)
    if path is not None:
        report_lines.append(f"full outputs kept in: {path.rpartition('/')[0]}")  # path or URL
    write_output(args.output, jsonio.dumps(result.output) + "\n")
    write_lines(sys.stderr, [result.report.to_json()] if args.report == "json" else report_lines)
    return 0


def _read_decisions(file: str | None) -> list[Decision]:
    if file is None or not Path(file).exists():
        return []
    try:
        records = read_json(file)
    except InputError as exc:
        raise InputError(str(exc), source=file) from exc
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise InputError("expected a JSON list of decision records", source=file)
    try:
        return list(DecisionLedger(records))
    except ValueError as exc:
        raise InputError(str(exc), source=file) from exc


def _check(args: argparse.Namespace) -> int:
    document = read_json(args.file)
    body = read_body(document, args.format)
    messages = body.history if body is not None else document
    fmt = body.format_hint or args.format if body is not None else args.format
    violations = check_history(messages, fmt)
    for v in violations:
        print(f"{args.file}: message {v.index}: [{v.code}] {v.reason}")
    if not violations:
        print(f"{args.file}: tool calls and results are paired correctly")
    return 1 if violations else 0
