"""What the console's page reads of the records database (:mod:`middleware.records`), every
replica's together: the sessions seen most recently, and a session's requests as the page
asks for them (the latest, those before or after a request's ``seq``, the bills of those
it shows that came since) with the session's running cost, a few hundred points at most.

A poll with nothing new is a few hundred bytes, and reads one session's row and an index
range, however many requests the session or the database holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from middleware.ledger.sums import SessionLedger, name
from middleware.proxy.console.record import encoded
from middleware.records import RecordStore, queries, request_pages
from middleware.records.tables import TOKEN_KINDS

#: Points of a session's running cost sent at most (every so many answers, and the last).
COST_POINTS = 240
#: Requests whose bills a poll asks for at most.
MAX_BILLS = 100


@dataclass(frozen=True)
class Asked:
    """What a page asks of a session's requests: ``limit`` of them at most, the latest,
    or the latest ``before`` a request's ``seq``, or the first ``after`` one (a poll,
    which also asks the bills of the requests ``bills`` names that have come since it
    drew them)."""

    limit: int
    before: int | None = None
    after: int | None = None
    bills: tuple[int, ...] = ()


def sessions_list(
    store: RecordStore, limit: int, filters: queries.Filters = queries.Filters()
) -> list[dict[str, Any]]:
    """The sessions seen most recently first, billed or not, as the list shows them; with
    ``filters``, those of the answers they select, billed by those answers only."""
    return [row_of(row) for row in queries.recent(store, limit, filters, billed=False)]


def row_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """A session as the list shows it: the console's counts (``None`` where no replica
    kept a record of its requests) beside its bill (``None``: none billed)."""
    seen = bool(row["requests"])
    bill = SessionLedger.from_row(row).as_dict() if row["answers"] else None
    return {
        "session": row["session"],
        "agent": row["agent"],
        "source": row["source"],
        "format": row["format"],
        "caller": row.get("caller"),
        "requests": row["requests"] if seen else row["answers"],
        "repairs": row["repairs"] if seen else None,
        "spills": row["spills"] if seen else None,
        "compactions": row["compactions"] if seen else None,
        "billed": bill["billed"] if bill else None,
        "without": bill["without"] if bill else None,
        "saved_dollars": bill["saved_dollars"] if bill else None,
        # What the read-backs cost, and the saving less it; what observe mode projected;
        # the refusals repairs spared.
        "effective_saved_dollars": bill["effective_saved_dollars"] if bill else None,
        "readbacks": bill["readbacks"] if bill else None,
        "observe": bill["observe"] if bill else None,
        "refused": bill["refused"] if bill else 0,
        "unpriced": bill["unpriced"] if bill else 0,
        "priced": bill["priced"] if bill else 0,
        "last": row["last"],
    }


def session_page(store: RecordStore, session: str, asked: Asked, epoch: str) -> bytes | None:
    """A session's counts and bill, and the requests ``asked`` of those the database
    keeps (each with its bill), as JSON (``None``: it has no record of the session).

    With no cursor, and on a poll that brings anything, ``costs`` is the running cost."""
    session = name(session)
    row = queries.session(store, session)
    if row is None:
        return None
    page = request_pages.request_page(
        store, session, before=asked.before, after=asked.after, limit=asked.limit
    )
    rows = page.requests[::-1]  # oldest first
    bills = {
        seq: bill
        for seq, answers in request_pages.bills(store, session, asked.bills[:MAX_BILLS]).items()
        if (bill := bill_of(answers)) is not None
    }
    head: dict[str, Any] = {
        "epoch": epoch,
        "row": row_of(row),
        "ledger": SessionLedger.from_row(row).as_dict() if row["answers"] else None,
        "kept": page.kept,
        "first": page.first,
        "last": page.last,
        "removed": max(0, page.counted - page.kept),
        "older": bool(rows) and page.first is not None and page.first < rows[0]["seq"],
        "more": bool(rows) and asked.after is not None and page.last is not None
        and page.last > rows[-1]["seq"],
        "bills": {str(seq): bill for seq, bill in bills.items()},
    }  # fmt: skip
    polled = asked.after is not None
    if asked.before is None and (not polled or rows or bills):
        head["costs"] = request_pages.running_cost(store, session, COST_POINTS)
    text = encoded(head)
    served = b",".join(_served(request) for request in rows)
    return text[:-1] + b',"requests":[' + served + b"]}"


def bill_of(answers: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """What a request's answers were billed, and would have cost without the middleware
    (``unread``: none reported a usage the ledger could read; ``None``: none billed)."""
    if not answers:
        return None
    read = [a for a in answers if not a["unread"]]
    if not read:
        return {"unread": True}
    priced = [a for a in read if a["dollars"] is not None and a["dollars_without"] is not None]
    projected = [a for a in read if a["observed"] and any(a[f"projected_{k}"] for k in TOKEN_KINDS)]
    refused = [a["refused"] for a in read if a["refused"] is not None]
    return {
        "model": read[-1]["model"],
        "billed": {kind: sum(int(a[f"billed_{kind}"]) for a in read) for kind in TOKEN_KINDS},
        "without": {kind: sum(int(a[f"without_{kind}"]) for a in read) for kind in TOKEN_KINDS},
        "dollars": sum(float(a["dollars"]) for a in priced) if priced else None,
        "dollars_without": sum(float(a["dollars_without"]) for a in priced) if priced else None,
        # Observe mode: it went as it came; what its cleaned request would have cost.
        "observed": any(a["observed"] for a in read),
        "projected": {
            kind: sum(int(a[f"projected_{kind}"]) for a in projected) for kind in TOKEN_KINDS
        } if projected else None,
        "dollars_projected": sum(float(a["dollars_projected"]) for a in projected)
        if projected and all(a["dollars_projected"] is not None for a in projected) else None,
        # The provider's 400 a repair spared it, and what it read back of what was hidden.
        "refused": refused[0] if refused else None,
        "readbacks": sum(int(a["readbacks"]) for a in read),
        "dollars_readback": sum(float(a["dollars_readback"] or 0) for a in priced),
    }  # fmt: skip


def _served(request: Mapping[str, Any]) -> bytes:
    """A request's record as the page gets it: its ``seq``, its number ``n`` in the
    session and the replica that kept it, the record as it was kept, and its bill."""
    record = bytes(request["record"])
    inner = record[1:-1] if record.startswith(b"{") and record.endswith(b"}") else b""
    head = encoded({"seq": request["seq"], "n": request["n"], "replica": request["replica"]})
    bill = encoded(bill_of(request["bills"]))
    return head[:-1] + (b"," + inner if inner else b"") + b',"bill":' + bill + b"}"
