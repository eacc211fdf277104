"""``chatcli-mw ledger``: what sessions were billed, as their answers' usage reported it,
beside what they would have cost unprocessed: from ledger files, or a running proxy."""

from __future__ import annotations

import argparse
import json
import math
import sys
import urllib.error
import urllib.request
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from middleware.cli.common import add_command, write_lines
from middleware.cli.plotting import pyplot, style, thousands
from middleware.errors import InputError
from middleware.ledger import FileLedger, LedgerSettings
from middleware.ledger.archive import sums_path
from middleware.ledger.journal import parts, read_journal, reading
from middleware.ledger.sums import Entry
from middleware.policy import load_policy
from middleware.policy.settings import bind
from middleware.proxy.settings import ProxySettings

if TYPE_CHECKING:
    from middleware.cli.common import Subcommands

#: Seconds to wait for the proxy's answer.
TIMEOUT = 10.0
KINDS = ("input", "cache_read", "cache_write_5m", "cache_write_1h", "output")


def add_ledger(commands: Subcommands) -> None:
    ledger = add_command(
        commands,
        "ledger",
        summary="what sessions were billed, and would have cost without the proxy",
        description="What each session was billed (the usage the provider reported in its "
        "answers, priced with ledger.prices) and the estimate of what the same requests "
        "would have cost unprocessed: read from ledger files (--file, or the policy's "
        "ledger.file), else asked of a running chatcli-mw serve (--url, else proxy.host and "
        "proxy.port; it answers clients on its machine, or those with proxy.recall_token: "
        "the policy's, or --token). SESSION: that session's ledger, by kind of token; none: "
        "the sessions billed most recently and the total.",
        examples=[
            "chatcli-mw ledger                       # the latest sessions and the total",
            "chatcli-mw ledger 3f2a9c1e-7b4d-4e0a   # one session, by kind of token",
            "chatcli-mw ledger --file a/ledger.jsonl --file b/ledger.jsonl   # two replicas",
            "chatcli-mw ledger --url http://proxy:8787 --token T --json",
        ],
    )
    ledger.add_argument("session", nargs="?", metavar="SESSION", help="one session's ledger")
    ledger.add_argument(
        "--file", action="append", metavar="PATH", help="a ledger file (repeat for several)"
    )
    ledger.add_argument("--url", help="the proxy (default: proxy.host and proxy.port)")
    ledger.add_argument("--policy", help="policy file or preset:NAME naming the proxy")
    ledger.add_argument("--token", help="the proxy's recall token (default: proxy.recall_token)")
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
    files = args.file or []
    kept = bind(policy, LedgerSettings).file
    if not files and args.url is None and kept is not None:
        files = [kept]
    if args.plot and not files:
        raise InputError("--plot draws ledger files: name them with --file (or ledger.file)")
    if args.plot:
        pyplot("chatcli-mw ledger --plot")
    found = _from_files(files, args) if files else _from_proxy(bind(policy, ProxySettings), args)
    if args.plot:
        sys.stderr.write(f"{args.plot}: {plot(files, args.session, Path(args.plot))}\n")
    if args.json:
        sys.stdout.write(json.dumps(found, indent=2) + "\n")
    elif args.session:
        write_lines(sys.stdout, session_table(found))
    else:
        write_lines(sys.stdout, sessions_table(found))
    return 0


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
    if args.session:
        found = ledger.session(args.session)
        if found is None:
            raise InputError(f"no answer of session {args.session!r} in {', '.join(files)}")
        return found
    return {"total": ledger.total(), "sessions": ledger.recent(max(args.limit, 0))}


def _from_proxy(settings: ProxySettings, args: argparse.Namespace) -> Any:
    base = (args.url or f"http://{_host(settings.host)}:{settings.port}").rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise InputError(f"--url {args.url!r} is not an http:// or https:// address")
    path = f"/sessions/{quote(args.session, safe='')}" if args.session else (
        f"/sessions?limit={max(args.limit, 0)}")  # fmt: skip
    return _get(base + path, args.token or settings.recall_token)


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


def session_table(ledger: dict[str, Any]) -> list[str]:
    """One session's ledger: tokens by kind, billed and estimated without the proxy."""
    billed, without = ledger["billed"], ledger["without"]
    lines = [
        f"session {ledger['session']}: {ledger['requests']} requests" + _models(ledger),
        f"{'tokens':16} {'billed':>14} {'est. without':>14}",
    ]
    for kind in KINDS:
        lines.append(f"{kind:16} {billed[kind]:>14,} {without[kind]:>14,}")
    lines.append(f"{'dollars':16} {_usd(billed['dollars']):>14} {_usd(without['dollars']):>14}")
    lines.append(_saving(ledger))
    return lines + _caveats(ledger)


def sessions_table(found: dict[str, Any]) -> list[str]:
    """The sessions billed most recently, one row each, and the total."""
    lines = [
        f"{'session':36} {'requests':>8} {'billed':>11} {'est. without':>12} "
        f"{'saved':>11} {'ratio':>6}"
    ]
    for ledger in [*found["sessions"], {**found["total"], "session": "total"}]:
        ratio = "" if ledger["ratio"] is None else f"{ledger['ratio']:.2f}"
        lines.append(
            f"{ledger['session'][:36]:36} {ledger['requests']:>8,} "
            f"{_usd(ledger['billed']['dollars']):>11} {_usd(ledger['without']['dollars']):>12} "
            f"{_usd(ledger['saved_dollars']):>11} {ratio:>6}"
        )
    total = found["total"]
    held = total.get("sessions", len(found["sessions"]))
    if held > len(found["sessions"]):
        lines.append(f"({held - len(found['sessions'])} more sessions: --limit)")
    return lines + _caveats(total)


def _saving(ledger: dict[str, Any]) -> str:
    if not ledger["without"]["dollars"]:
        return "no priced answer: see ledger.prices"
    return (
        f"saved {_usd(ledger['saved_dollars'])} (billed {ledger['ratio']:.2f} of the "
        "estimate without chatcli-middleware)"
    )


def _caveats(ledger: dict[str, Any]) -> list[str]:
    notes = []
    if ledger["unread"]:
        notes.append(f"{ledger['unread']} answers reported no usage that could be read")
    if ledger["unpriced"]:
        notes.append(
            f"{ledger['unpriced']} answers of models ledger.prices does not name "
            "(counted in tokens, not in dollars)"
        )
    return notes


def _models(ledger: dict[str, Any]) -> str:
    models = ledger.get("models") or {}
    return f" ({', '.join(models)})" if models else ""


def _usd(dollars: float) -> str:
    return f"${dollars:,.4f}" if abs(dollars) < 100 else f"${dollars:,.2f}"


def plot(files: list[str], session: str | None, path: Path) -> str:
    """What each request was billed beside the estimate without the proxy, in the order
    they were billed: the running totals in dollars above, each request's prompt tokens
    by how they were billed below. Returns the line saying what was drawn."""
    timed: list[tuple[float, Entry]] = []
    for file in files:
        ledger_file = Path(file).expanduser()
        with reading(ledger_file):  # the parts rotated out that are still there, then it
            for _, kept in [*parts(ledger_file), (0, ledger_file)]:
                for record in read_journal(kept):
                    if session is not None and record.get("session") != session:
                        continue
                    try:
                        when = float(record["time"])
                        if not record.get("unread") and math.isfinite(when):
                            timed.append((when, Entry.from_record(record)))
                    except (ValueError, OverflowError):
                        continue
    entries = [entry for _, entry in sorted(timed, key=lambda pair: pair[0])]
    if not entries:
        raise InputError(f"nothing billed to draw{f' for session {session!r}' if session else ''}")
    plt = pyplot("chatcli-mw ledger --plot")
    figure, (money, tokens) = plt.subplots(2, 1, figsize=(11, 7.5), sharex=True)
    calls = range(1, len(entries) + 1)
    billed = list(accumulate(e.dollars or 0.0 for e in entries))
    without = list(accumulate(e.dollars_without or 0.0 for e in entries))
    money.plot(
        calls, without, label="estimated without chatcli-middleware", **style(0, baseline=True)
    )
    money.plot(calls, billed, label="billed", **style(0))
    cheaper = [w >= b for b, w in zip(billed, without, strict=True)]
    money.fill_between(
        calls, billed, without, where=cheaper, color=style(2)["color"], alpha=0.2, label="saved"
    )
    money.set_ylabel("US dollars, running total")
    saved = without[-1] - billed[-1]
    share = f" ({saved / without[-1]:.0%})" if without[-1] else ""
    money.set_title(f"billed ${billed[-1]:,.2f}, estimated without ${without[-1]:,.2f}: "
                    f"saved ${saved:,.2f}{share}", fontsize=10)  # fmt: skip
    money.legend(fontsize=8, loc="upper left")
    bottom = [0] * len(entries)
    for index, (kind, label) in enumerate(_KINDS):
        heights = [getattr(e.billed, kind) for e in entries]
        tokens.bar(calls, heights, bottom=bottom, width=1.0, label=f"billed: {label}",
                   color=style(index)["color"])  # fmt: skip
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    tokens.plot(calls, [e.without.prompt for e in entries], label="estimated without: prompt",
                **style(0, baseline=True))  # fmt: skip
    thousands(tokens.yaxis)
    tokens.set_ylabel("prompt tokens of the request")
    tokens.set_xlabel("request, in the order billed")
    tokens.legend(fontsize=8, loc="upper left")
    who = f"session {session}" if session else f"{len(files)} ledger file(s), every session"
    said = f"{len(entries)} requests of {who} drawn"
    figure.suptitle(said, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return said


_KINDS = (("cache_read", "cache read"), ("cache_write_5m", "cache write 5m"),
          ("cache_write_1h", "cache write 1h"), ("input", "input"))  # fmt: skip
