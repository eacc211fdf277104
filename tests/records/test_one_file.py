"""SQLite, the embedded default: several processes of one machine write one file at once
(WAL), and what each wrote is there for the next to read."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from record_builders import records_in

from middleware.records import queries

WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[3])
    from record_builders import answer, records_in
    from pathlib import Path
    records = records_in(Path(sys.argv[1]), replica=sys.argv[2])
    for n in range(400):
        assert records.put(answer(f"{sys.argv[2]}-{n}", session=f"s{n % 5}", time=float(n)))
    assert records.writer.flush(120)
    records.close()
    """
)


def test_processes_on_one_machine_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "records.sqlite"
    tests = str(Path(__file__).parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), name, tests], env=env)
        for name in ("a", "b", "c")
    ]
    assert [writer.wait(timeout=300) for writer in writers] == [0, 0, 0]
    records = records_in(path)
    ledger = records.store()
    total = queries.totals(ledger)
    assert total["answers"] == 1200 and total["sessions"] == 5
    assert total["billed_input"] == 1200 * 10
    assert sum(row["answers"] for row in queries.recent(ledger, 10)) == 1200
    records.close()
