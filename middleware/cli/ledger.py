"""``chatcli-mw ledger``: what sessions were billed, as their answers' usage reported it,
beside what they would have cost unprocessed: from the records database (every replica's
answers), a running proxy, or ledger files; and ``chatcli-mw ledger import FILE...``, which
moves ledger files into the database."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from middleware.cli.common import add_command, write_lines
from middleware.cli.ledger_views import groups_table, plot, session_table, sessions_table
from middleware.cli.plotting import pyplot
from middleware.errors import InputError
from middleware.ledger import FileLedger, Ledger, LedgerSettings
from middleware.ledger.archive import sums_path
from middleware.ledger.imports import import_files
from middleware.ledger.journal import parts
from middleware.policy import load_policy
from middleware.policy.secrets import redact_urls
from middleware.policy.settings import bind
from middleware.proxy.settings import ProxySettings
from middleware.records import Records, RecordSettings
from middleware.records.queries import DIMENSIONS, Filters

if TYPE_CHECKING:
    from middleware.cli.common import Subcommands

#: Seconds to wait for the proxy's answer.
TIMEOUT = 10.0


def add_ledger(commands: Subcommands) -> None:
    ledger = add_command(
        commands,
        "ledger",
        summary="what sessions were billed, and would have cost without the proxy",
        description="What each session was billed (the usage the provider reported in its "
        "answers, priced with ledger.prices) and the estimate of what the same requests "
        "would have cost unprocessed. Read from the records database every replica writes "
        "(--db, else the policy's ledger.url: by default records.sqlite in the state "
        "folder), else from a running chatcli-mw serve (--url, or proxy.host and proxy.port "
        "when ledger.url is null; it answers clients on its machine, or those with "
        "proxy.recall_token: the policy's, or --token), or from ledger files (--file). "
        "SESSION: that session's ledger, by kind of token; none: the sessions billed most "
        "recently and the total; --by: the sums by caller (key: a digest of the API key), "
        "tag, agent, model or day. 'ledger import FILE...' moves ledger files into the "
        "database (each answer once, however often it is imported).",
        examples=[
            "chatcli-mw ledger                       # the latest sessions and the total",
            "chatcli-mw ledger 3f2a9c1e-7b4d-4e0a   # one session, by kind of token",
            "chatcli-mw ledger --by tag --tag team=infra   # one team's spend, by its tags",
            "chatcli-mw ledger --by day --json",
            "chatcli-mw ledger --db postgresql://chatcli@db.internal/chatcli --by key",
            "chatcli-mw ledger --url http://proxy:8787 --token T --json",
            "chatcli-mw ledger import replica-a/ledger.jsonl replica-b/ledger.jsonl",
        ],
    )
    ledger.add_argument(
        "words",
        nargs="*",
        metavar="SESSION | import FILE...",
        help="one session's ledger; or 'import' and the ledger files to move in",
    )
    ledger.add_argument("--db", metavar="URL", help="the records database (default: ledger.url)")
    ledger.add_argument("--url", help="a running proxy (default: proxy.host and proxy.port)")
    ledger.add_argument(
        "--file", action="append", metavar="PATH", help="a ledger file (repeat for several)"
    )
    ledger.add_argument("--policy", help="policy file or preset:NAME naming the proxy")
    ledger.add_argument("--token", help="the proxy's recall token (default: proxy.recall_token)")
    ledger.add_argument(
        "--by", choices=DIMENSIONS, help="sum by caller (key), tag, agent, model, day or replica"
    )
    ledger.add_argument("--key", metavar="DIGEST", help="only the answers of this caller")
    ledger.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="only the answers so tagged (repeat: all of them)",
    )
    ledger.add_argument("--agent", help="only the answers of this agent (as the console names it)")
    ledger.add_argument("--model", help="only the answers of this model")
    ledger.add_argument("--limit", type=int, default=20, metavar="N", help="sessions listed")
    ledger.add_argument("--json", action="store_true", help="print the ledger as JSON")
    ledger.add_argument(
        "--plot",
        metavar="FILE.png",
        help="draw what each request was billed beside the estimate without the proxy, from "
        "ledger files (needs the [plot] extra)",
    )
    ledger.set_defaults(run=_ledger)


def _ledger(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy)
    if args.words[:1] == ["import"]:
        return _import(args, bind(policy, RecordSettings))
    if len(args.words) > 1:
        raise InputError(f"ledger takes one SESSION, or 'import FILE...'; got {args.words}")
    args.session = args.words[0] if args.words else None
    try:
        args.filters = Filters.of(args.key, args.tag, args.agent, args.model)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    files = args.file or []
    if args.plot and not files:
        raise InputError("--plot draws ledger files: name them with --file (or ledger.file)")
    if files and (args.by or args.filters):
        raise InputError(
            "--by, --key, --tag, --agent and --model read the records database (--db) or a "
            "proxy (--url), not ledger files: import them first"
        )
    if args.plot:
        pyplot("chatcli-mw ledger --plot")
    found = _found(args, policy, files)
    if args.plot:
        sys.stderr.write(f"{args.plot}: {plot(files, args.session, Path(args.plot))}\n")
    if args.json:
        sys.stdout.write(json.dumps(found, indent=2) + "\n")
    elif args.session:
        write_lines(sys.stdout, session_table(found))
    elif args.by:
        write_lines(sys.stdout, groups_table(found))
    else:
        write_lines(sys.stdout, sessions_table(found))
    return 0


def _found(args: argparse.Namespace, policy: Any, files: list[str]) -> Any:
    """The ledger from where the options say: ``--file``, ``--url``, ``--db``; else the
    policy's database if it holds one, its ``ledger.file``, or the proxy it names."""
    if files:
        return _from_files(files, args)
    if args.url is not None:
        return _from_proxy(bind(policy, ProxySettings), args)
    records = bind(policy, RecordSettings)
    if args.db is not None:
        return _from_database(args.db, args)
    database = records.database
    if database is not None and _there(database):
        return _from_database(database, args)
    kept = bind(policy, LedgerSettings).file
    if kept is not None and not (args.by or args.filters):
        return _from_files([kept], args)
    return _from_proxy(bind(policy, ProxySettings), args)


def _there(database: str) -> bool:
    """Whether a database is there to read: a server, or a SQLite file that exists."""
    if not database.startswith("sqlite"):
        return True
    path = database.split(":///", 1)[-1]
    return bool(path) and Path(path).expanduser().is_file()


def _from_database(url: str, args: argparse.Namespace) -> Any:
    try:
        records = Records.open(_reading(url), replica="chatcli-mw-ledger")
    except Exception as exc:  # an unreachable server, a URL of no database
        raise InputError(f"cannot read the records database {redact_urls(url)}: {exc}") from exc
    try:
        return _read(Ledger(records), args, redact_urls(url))
    finally:
        records.close(timeout=0)


def _reading(url: str) -> RecordSettings:
    return RecordSettings(url, 1024 * 1024, None, None, None)


def _read(ledger: Ledger | FileLedger, args: argparse.Namespace, where: str) -> Any:
    if args.session:
        found = ledger.session(args.session)
        if found is None:
            raise InputError(f"no answer of session {args.session!r} in {where}")
        return found
    if isinstance(ledger, FileLedger):
        return {"total": ledger.total(), "sessions": ledger.recent(max(args.limit, 0))}
    total = ledger.total(args.filters)
    if args.by:
        return {
            "total": total,
            "by": args.by,
            "groups": ledger.by(args.by, args.filters)[: max(args.limit, 0)],
        }
    return {"total": total, "sessions": ledger.recent(max(args.limit, 0), args.filters)}


def _from_files(files: list[str], args: argparse.Namespace) -> Any:
    for path in files:
        there = Path(path).expanduser()  # just rotated, it is the sums and the parts
        if not (there.is_file() or sums_path(there).is_file() or parts(there)):
            raise InputError(f"{path}: no ledger file there (ledger.file)")
    ledger = FileLedger.read(*files)
    if ledger.skipped:
        sys.stderr.write(
            f"chatcli-mw: {ledger.skipped} lines of the ledger files were "
            "not answers and were skipped\n"
        )
    return _read(ledger, args, ", ".join(files))


def _from_proxy(settings: ProxySettings, args: argparse.Namespace) -> Any:
    base = (args.url or f"http://{_host(settings.host)}:{settings.port}").rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise InputError(f"--url {args.url!r} is not an http:// or https:// address")
    if args.session:
        return _get(
            f"{base}/sessions/{quote(args.session, safe='')}", args.token or settings.recall_token
        )
    query: list[tuple[str, str]] = [("limit", str(max(args.limit, 0)))]
    for name in ("by", "key", "agent", "model"):
        if getattr(args, name):
            query.append((name, getattr(args, name)))
    query += [("tag", tag) for tag in args.tag]
    return _get(f"{base}/sessions?{urlencode(query)}", args.token or settings.recall_token)


def _import(args: argparse.Namespace, records: RecordSettings) -> int:
    files = args.words[1:]
    if not files:
        raise InputError("ledger import takes the ledger files to move in: ledger import FILE...")
    url = args.db or records.database
    if url is None:
        raise InputError(
            "ledger.url is null (records kept in memory): name the database to "
            "import into with --db URL"
        )
    done = import_files(_reading(url), [Path(file) for file in files])
    sys.stdout.write(
        f"{done.read:,} answers read from {len(files)} file(s): {done.new:,} imported into "
        f"{redact_urls(url)}, {done.there:,} there already; {done.skipped:,} lines were no "
        "answer\n"
    )
    return 0


def _host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host and host != "::" else ("[::1]" if host == "::" else host)


def _get(url: str, token: str | None) -> Any:
    request = urllib.request.Request(url, headers={"accept": "application/json"})
    if token:
        request.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        said = exc.read().decode("utf-8", "replace").strip()
        raise InputError(f"{url}: {exc.code} {said}") from exc
    except (urllib.error.URLError, TimeoutError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise InputError(
            f"cannot read the ledger at {url} ({reason}): is chatcli-mw serve "
            "running there? (--url)"
        ) from exc
