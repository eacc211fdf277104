"""The ledger file's history: past ``ledger.rotate_bytes`` the file is renamed to its
next part (``ledger.jsonl.1``, ``.2``, ...) and the sums of every part are written again
(``ledger.jsonl.sums``: the totals, then the ledgers of the sessions billed last, one JSON
line each), so ``chatcli-mw ledger --file`` reads the sums and the current file, never the
history. The parts are kept for ``chatcli-mw ledger --plot``; they may be removed at will.

The sums name the last part they hold (``through``): a part past it (a process stopped
between the rename and the sums) is read with them and summed at the next rotation. A new
part is numbered past both the parts there are and ``through``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from middleware.ledger.journal import parts, rename_to_next_part
from middleware.ledger.lines import Lines, read_journal
from middleware.ledger.locks import reading

logger = logging.getLogger(__name__)


class Ledger(Protocol):
    """What the archive reads into and sums in (:class:`.book.Ledger`)."""

    skipped: int

    def replay(self, record: Mapping[str, Any]) -> None: ...

    def restore(self, state: object, *, totals: bool = False) -> None: ...

    def sums(self) -> tuple[dict[str, Any], list[dict[str, Any]]]: ...


#: The version of the sums' layout (its first line's ``sums``).
SUMS = 1
#: Bytes of one line of the sums read, at most: the totals' line names 64 models of 256
#: characters (:data:`.book.MAX_MODELS_IN_TOTAL`), each at most 6 bytes in JSON.
MAX_SUMS_LINE_BYTES = 1024 * 1024


def sums_path(path: Path) -> Path:
    """Where the sums of the parts rotated out of the ledger file at ``path`` are."""
    return path.with_name(path.name + ".sums")


def read_into(ledger: Ledger, path: str | Path) -> None:
    """Add what the ledger file at ``path`` holds to ``ledger``: its sums, any part they
    do not hold, the current file; each read as a stream, the file held still."""
    file = Path(path).expanduser()
    with reading(file):
        _replay_parts(ledger, file, _read_sums(ledger, file))
        _replay(ledger, file)


def rotate(ledger: Ledger, path: Path) -> None:
    """Rename the ledger file at ``path`` to its next part and write the sums of every
    part, summed in ``ledger`` (an empty one). Called with the file's lock held
    exclusively (:class:`.journal.Journal`)."""
    held = _read_sums(ledger, path)
    # Numbered past the sums: a part they hold may have been removed since.
    rename_to_next_part(path, after=held)
    through = _replay_parts(ledger, path, held)
    totals, sessions = ledger.sums()
    head = {"sums": SUMS, "through": through, "skipped": ledger.skipped, "totals": totals}
    written = sums_path(path)
    temporary = written.with_name(written.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as file:
        for line in (head, *sessions):
            file.write(json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n")
        file.flush()
        os.fsync(file.fileno())
    os.chmod(temporary, 0o600)
    os.replace(temporary, written)


def _read_sums(ledger: Ledger, path: Path) -> int:
    """Add the sums of ``path``'s parts to ``ledger``; the last part they hold (0: none,
    or sums that cannot be read, and every part is read instead)."""
    lines = iter(Lines(sums_path(path), MAX_SUMS_LINE_BYTES))
    head = next(lines, None)
    through = head.get("through") if head is not None else None
    try:
        if head is None or head.get("sums") != SUMS or not isinstance(through, int):
            raise ValueError("no sums")
        ledger.restore(head.get("totals"), totals=True)
    except ValueError:
        if sums_path(path).exists():
            logger.warning(
                "%s does not hold the ledger's sums: every part of %s is read",
                sums_path(path),
                path,
            )
        return 0
    skipped = head.get("skipped")
    ledger.skipped += skipped if isinstance(skipped, int) and skipped > 0 else 0
    for state in lines:
        try:
            ledger.restore(state)
        except ValueError:
            ledger.skipped += 1
    return max(through, 0)


def _replay_parts(ledger: Ledger, path: Path, through: int) -> int:
    """Replay the parts of ``path`` past ``through``; the last part there is."""
    last = through
    for number, part in parts(path):
        if number > through:
            _replay(ledger, part)
        last = max(last, number)
    return last


def _replay(ledger: Ledger, path: Path) -> None:
    records = read_journal(path)
    for record in records:
        ledger.replay(record)
    ledger.skipped += records.skipped
