"""Ledger files moved into the records database (``chatcli-mw ledger import``): each line an
answer, keyed by the key the journal wrote with it (or, for a line written before keys, a
digest of the line), so a file imported twice, or two replicas' files that overlap, count
each answer once."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from middleware.ledger.book import Caller, answer_row
from middleware.ledger.checks import read_text, read_time
from middleware.ledger.entry import Entry
from middleware.ledger.journal import parts
from middleware.ledger.lines import read_journal
from middleware.ledger.locks import reading
from middleware.records import AnswerRow, Records, RecordSettings, digest_key

#: The replica an imported answer is recorded as coming from.
IMPORTED = "imported"
#: Answers written in one transaction.
BATCH = 500


@dataclass
class Imported:
    """What an import did: answers read, newly written, there already; lines skipped."""

    read: int = 0
    new: int = 0
    there: int = 0
    skipped: int = 0


def import_files(settings: RecordSettings, paths: Sequence[Path]) -> Imported:
    """Write the answers of the ledger files at ``paths`` (each with its rotated parts
    that are still there) into the database ``settings`` name."""
    done = Imported()
    records = Records.open(settings, replica=IMPORTED)
    try:
        store = records.store()
        batch: list[AnswerRow] = []
        for path in paths:
            for record in _records(path.expanduser(), done):
                row = answer_of(record)
                if row is None:
                    done.skipped += 1
                    continue
                done.read += 1
                batch.append(row)
                if len(batch) == BATCH:
                    _write(store, batch, done)
        if batch:
            _write(store, batch, done)
    finally:
        records.close(timeout=0)
    return done


def answer_of(record: dict[str, Any]) -> AnswerRow | None:
    """The answer a ledger file line holds (``None``: it holds none)."""
    when = read_time(record.get("time"))
    fmt = read_text(record.get("format"))
    if when is None or fmt is None:
        return None
    key = read_text(record.get("key")) or digest_key(
        IMPORTED, json.dumps(record, sort_keys=True, ensure_ascii=False)
    )
    session = read_text(record.get("session"))
    entry = None
    if not record.get("unread"):
        try:
            entry = Entry.from_record(record)
        except ValueError:
            return None
    return answer_row(
        key,
        now=when,
        session=session,
        fmt=fmt,
        entry=entry,
        model=None,
        replica=IMPORTED,
        who=Caller(),
    )


def _records(path: Path, done: Imported) -> Iterator[dict[str, Any]]:
    with reading(path):  # the parts rotated out that are still there, then the file
        for _, kept in [*parts(path), (0, path)]:
            lines = read_journal(kept)
            yield from lines
            done.skipped += lines.skipped


def _write(store: Any, batch: list[AnswerRow], done: Imported) -> None:
    new = store.write(batch, [])
    done.new += new
    done.there += len(batch) - new
    batch.clear()
