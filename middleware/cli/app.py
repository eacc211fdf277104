"""``chatcli-mw``: clean histories, check them, inspect policies and plugins, simulate costs.

Each subcommand is one ``add_<name>(commands)`` function in :data:`COMMANDS`: it adds its
subparser and binds its handler with ``set_defaults(run=handler)``; a handler takes the parsed
arguments and returns the exit status. To add a command, write such a function (in its own
module if it is large, like ``cli_simulate.py``) and append it to :data:`COMMANDS`. A handler
raises :class:`~middleware.errors.MiddlewareError` (or lets an ``OSError`` through) for bad
input; :func:`main` turns it into one ``chatcli-mw: error: FILE: problem`` line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeAlias

from middleware import __version__
from middleware.cli.simulate import add_simulate
from middleware.errors import MiddlewareError
from middleware.formats import FORMATS
from middleware.formats.check import validate
from middleware.pipeline import Pipeline
from middleware.plugin.host import PluginHost
from middleware.policy import load_policy, validate_policy_file
from middleware.report import ProblemReport
from middleware.session.decisions import Decision, DecisionLedger
from middleware.steps.budget.line_rules import line_rule

EPILOG = """\
examples:
  chatcli-mw process session.json                  clean a history with the default policy
  chatcli-mw process body.json --policy prod.yaml -o clean.json --report json
  chatcli-mw check session.json                    list pairing problems (exit 1 if any)
  chatcli-mw validate policies/*.yaml              check policy files for CI
  chatcli-mw config --policy prod.yaml --show-origin
  chatcli-mw plugins
  chatcli-mw simulate session.jsonl --policy policies/baselines/chatcli.yaml --plot cost.png
"""


class InputError(MiddlewareError):
    """A file that cannot be read as a history (``source``: another file than the
    command's input, when it is the one at fault)."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        super().__init__(message)
        self.source = source


if TYPE_CHECKING:
    Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.run(args)
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


def add_process(commands: Subcommands) -> None:
    process = commands.add_parser("process", help="clean a history and write it back")
    process.add_argument(
        "file", metavar="FILE", help="a JSON history or request body (- for stdin)"
    )
    process.add_argument("--policy", help="policy file (default: the embedded default)")
    process.add_argument("--format", choices=FORMATS, default="auto")
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
    check = commands.add_parser("check", help="list tool-call pairing problems (exit 1 if any)")
    check.add_argument("file", metavar="FILE")
    check.add_argument("--format", choices=FORMATS, default="auto")
    check.set_defaults(run=_check)


def add_validate(commands: Subcommands) -> None:
    validate_cmd = commands.add_parser("validate", help="check policy files (exit 1 on error)")
    validate_cmd.add_argument("files", metavar="FILE", nargs="+")
    validate_cmd.set_defaults(run=_validate)


def add_config(commands: Subcommands) -> None:
    config = commands.add_parser("config", help="print the effective policy")
    config.add_argument("--policy", help="policy file (default: the embedded default)")
    config.add_argument("--show-origin", action="store_true", help="say where each value came from")
    config.add_argument("--json", action="store_true", help="print JSON")
    config.set_defaults(run=_config)


def add_plugins(commands: Subcommands) -> None:
    plugins = commands.add_parser("plugins", help="list the loaded plugins and their hooks")
    plugins.add_argument("--json", action="store_true", help="print JSON")
    plugins.add_argument(
        "--tool",
        action="append",
        default=[],
        metavar="NAME",
        help="also show which plugin declares a cap for this tool, and the cap in effect "
        "under the policy (repeatable)",
    )
    plugins.add_argument("--policy", help="policy file or preset:NAME (default: embedded)")
    plugins.set_defaults(run=_plugins)


def read_json(file: str) -> Any:
    """A JSON document from a file or ``-`` (stdin), as an :class:`InputError` if not JSON."""
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(exc.strerror or str(exc)) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from exc


def unwrap(document: Any, fmt: str) -> tuple[Any, str, str | None]:
    """The history in ``document`` (a list, or a body's ``messages``/``input``), the
    format to use, and the body key it came from."""
    if isinstance(document, dict):
        for key, hint in (("messages", fmt), ("input", "responses" if fmt == "auto" else fmt)):
            if key in document:
                return document[key], hint, key
        raise InputError("a request body needs a 'messages' or 'input' list")
    return document, fmt, None


def _process(args: argparse.Namespace) -> int:
    document = read_json(args.file)
    messages, fmt, key = unwrap(document, args.format)
    cleaned: Any
    if isinstance(messages, str):  # a Responses body with a plain-text input
        cleaned, report_lines = messages, ["nothing to process: the input is a string"]
        report_json = json.dumps({"changed": False})
    else:
        # The spill files are the command's output as much as the history is: keep them.
        policy = load_policy(args.policy, overrides={"spill.keep": True})
        decisions = _read_decisions(args.decisions)
        with Pipeline(policy, session_id=args.session, decisions=decisions) as pipe:
            result = pipe.process(messages, format=fmt)
            if args.decisions:
                state = json.dumps(pipe.decisions.export(), ensure_ascii=False, indent=1)
                Path(args.decisions).write_text(state + "\n", encoding="utf-8")
        cleaned = result.messages
        report_lines, report_json = result.report.summary_lines(), result.report.to_json()
        path = next((a.detail["path"] for a in result.report.actions if "path" in a.detail), None)
        if path is not None:
            report_lines.append(f"full outputs kept in: {Path(path).parent}")
    output = cleaned if key is None else {**document, key: cleaned}
    text = json.dumps(output, ensure_ascii=False, indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    _write_lines(sys.stderr, [report_json] if args.report == "json" else report_lines)
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
    messages, fmt, _ = unwrap(read_json(args.file), args.format)
    violations = validate(messages, fmt)
    for v in violations:
        print(f"{args.file}: message {v.index}: [{v.code}] {v.reason}")
    if not violations:
        print(f"{args.file}: tool calls and results are paired correctly")
    return 1 if violations else 0


def _validate(args: argparse.Namespace) -> int:
    failed = 0
    for file in args.files:
        errors = validate_policy_file(file)
        for error in errors:
            print(error, file=sys.stderr)
        if errors:
            failed += 1
        else:
            print(f"{file}: ok")
    return 1 if failed else 0


def _config(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy)
    if args.json:
        data: dict[str, Any] = {"source": policy.source, "policy": policy.to_dict()}
        if args.show_origin:
            data["origins"] = dict(policy.origins)
        print(json.dumps(data, ensure_ascii=False, indent=2))
        return 0
    print(f"# effective policy: {policy.source} (sha256 {policy.digest[:12]})")
    _print_tree(policy.to_dict(), "", policy.origins if args.show_origin else None)
    return 0


def _print_tree(node: dict[str, Any], prefix: str, origins: Any) -> None:
    indent = "  " * prefix.count(".")
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            print(f"{indent}{key}:")
            _print_tree(value, f"{dotted}.", origins)
            continue
        line = f"{indent}{key}: {json.dumps(value, ensure_ascii=False)}"
        if origins is not None and dotted in origins:
            line += f"  # {origins[dotted]}"
        print(line)


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
            tool: None if d is None else {"plugin": d.plugin, "max_chars": d.cap.max_chars,
                                          "exempt": d.cap.exempt}
            for tool, d in caps.items()
        }  # fmt: skip
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
            what = "exempt" if declared.cap.exempt else (
                f"{declared.cap.max_chars:,} chars" if declared.cap.max_chars
                else "the per-tool default"
            )  # fmt: skip
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


def _write_lines(stream: TextIO, lines: Sequence[str]) -> None:
    for line in lines:
        stream.write(line + "\n")


#: The subcommands, in the order ``--help`` lists them.
COMMANDS: tuple[Callable[[Subcommands], None], ...] = (
    add_process,
    add_check,
    add_validate,
    add_config,
    add_plugins,
    add_simulate,
)
