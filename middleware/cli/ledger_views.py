"""What ``chatcli-mw ledger`` prints: one session by kind of token, the latest sessions with
the total, sums by who asked (``--by``), and the drawing of ledger files (``--plot``)."""

from __future__ import annotations

import math
from itertools import accumulate
from pathlib import Path
from typing import Any

from middleware.cli.plotting import pyplot, style, thousands
from middleware.errors import InputError
from middleware.ledger.journal import parts
from middleware.ledger.lines import read_journal
from middleware.ledger.locks import reading
from middleware.ledger.sums import Entry

KINDS = ("input", "cache_read", "cache_write_5m", "cache_write_1h", "output")
#: How to price a model the ledger does not know (docs/policy.md, ``ledger.prices``).
PRICE_HINT = (
    "add its price to the policy: ledger.prices.MODEL: {input: 3, output: 15} "
    "(dollars per million tokens)"
)


def session_table(ledger: dict[str, Any]) -> list[str]:
    """One session's ledger: tokens by kind, billed and estimated without the proxy."""
    billed, without = ledger["billed"], ledger["without"]
    lines = [
        f"session {ledger['session']}: {ledger['requests']} requests" + _models(ledger),
        f"{'tokens':16} {'billed':>14} {'est. without':>14}",
    ]
    for kind in KINDS:
        lines.append(f"{kind:16} {billed[kind]:>14,} {without[kind]:>14,}")
    lines.append(
        f"{'dollars':16} {_money(ledger, billed['dollars']):>14} "
        f"{_money(ledger, without['dollars']):>14}"
    )
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
            f"{_money(ledger, ledger['billed']['dollars']):>11} "
            f"{_money(ledger, ledger['without']['dollars']):>12} "
            f"{_money(ledger, ledger['saved_dollars']):>11} {ratio:>6}"
        )
    total = found["total"]
    held = total.get("sessions", len(found["sessions"]))
    if held > len(found["sessions"]):
        lines.append(f"({held - len(found['sessions'])} more sessions: --limit)")
    return lines + _caveats(total)


def groups_table(found: dict[str, Any]) -> list[str]:
    """Sums by one dimension (``--by``), the largest bill first, and the total."""
    by = found["by"]
    lines = [
        f"{by:36} {'requests':>8} {'billed':>11} {'est. without':>12} {'saved':>11} {'ratio':>6}"
    ]
    for group in [*found["groups"], {**found["total"], by: "total"}]:
        ratio = "" if group["ratio"] is None else f"{group['ratio']:.2f}"
        name = "(none)" if group[by] is None else str(group[by])
        lines.append(
            f"{name[:36]:36} {group['requests']:>8,} "
            f"{_money(group, group['billed']['dollars']):>11} "
            f"{_money(group, group['without']['dollars']):>12} "
            f"{_money(group, group['saved_dollars']):>11} {ratio:>6}"
        )
    return lines + _caveats(found["total"])


def _saving(ledger: dict[str, Any]) -> str:
    if not ledger["priced"]:
        return f"no priced answer: {PRICE_HINT}"
    return (
        f"saved {_usd(ledger['saved_dollars'])} (billed {ledger['ratio']:.2f} of the "
        "estimate without chatcli-middleware)"
    )


def _caveats(ledger: dict[str, Any]) -> list[str]:
    notes = _proofs(ledger)
    if ledger["unread"]:
        notes.append(f"{ledger['unread']} answers reported no usage that could be read")
    if ledger["unpriced"]:
        notes.append(
            f"{ledger['unpriced']} answers of models ledger.prices does not name "
            f"(counted in tokens, not in dollars; {PRICE_HINT})"
        )
    return notes


def _proofs(ledger: dict[str, Any]) -> list[str]:
    """What observe mode projected, what read-backs cost, and the refusals repairs spared
    (a ledger of a release before them has none of these)."""
    notes = []
    observe = ledger.get("observe") or {}
    if observe.get("answers"):
        line = f"observe mode: {observe['projected']:,} of {observe['answers']:,} requests"
        line += " projected"
        if ledger["priced"]:
            line += (
                f": billed {_usd(observe['billed_dollars'])}, cleaned would have been "
                f"{_usd(observe['would_have_dollars'])}, would have saved "
                f"{_usd(observe['would_have_saved_dollars'])}"
            )
        notes.append(line)
    readbacks = ledger.get("readbacks") or {}
    if readbacks.get("count"):
        line = f"{readbacks['count']:,} read-backs of what the proxy hid "
        line += f"({readbacks['tokens']:,} tokens"
        if ledger["priced"]:
            line += f", {_usd(readbacks['dollars'])}): effective saving "
            line += _usd(ledger["effective_saved_dollars"])
        notes.append(line + ("" if ledger["priced"] else ")"))
    if ledger.get("refused"):
        notes.append(
            f"{ledger['refused']:,} requests the provider would have refused as they came "
            "(a repair made them valid: not counted as a saving)"
        )
    return notes


def _models(ledger: dict[str, Any]) -> str:
    models = ledger.get("models") or {}
    return f" ({', '.join(models)})" if models else ""


def _money(ledger: dict[str, Any], dollars: float) -> str:
    """Dollars of a ledger's priced answers, or "not priced" when it has none: never
    $0.0000 (free) nor a saving for a model without a price."""
    return _usd(dollars) if ledger["priced"] else "not priced"


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
    money.set_title(
        f"billed ${billed[-1]:,.2f}, estimated without ${without[-1]:,.2f}: "
        f"saved ${saved:,.2f}{share}",
        fontsize=10,
    )
    money.legend(fontsize=8, loc="upper left")
    bottom = [0] * len(entries)
    for index, (kind, label) in enumerate(_KINDS):
        heights = [getattr(e.billed, kind) for e in entries]
        tokens.bar(
            calls,
            heights,
            bottom=bottom,
            width=1.0,
            label=f"billed: {label}",
            color=style(index)["color"],
        )
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    tokens.plot(
        calls,
        [e.without.prompt for e in entries],
        label="estimated without: prompt",
        **style(0, baseline=True),
    )
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


_KINDS = (
    ("cache_read", "cache read"),
    ("cache_write_5m", "cache write 5m"),
    ("cache_write_1h", "cache write 1h"),
    ("input", "input"),
)
