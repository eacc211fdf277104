"""The ledger file over a long life (issue 36, item 8): read back as a stream into the
ledger's sums, in memory that does not grow with the file, and rotated past
``ledger.rotate_bytes`` with the sums of the parts kept beside it, so a start reads the
sums and the current file, never the history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest
from record_builders import records_in

import middleware
from middleware.ledger import FileLedger, Ledger, LedgerSettings, Usage
from middleware.ledger.archive import sums_path
from middleware.ledger.journal import parts
from middleware.ledger.lines import read_journal
from middleware.policy.settings import bind

ROTATE = 4096
#: Seconds a test waits for its ledger file to be written (a loaded machine is slow to
#: rotate it; a process stopping waits 5 s at most, and says what it left).
WRITTEN = 120.0


def settings(file: Path, rotate: int | None = ROTATE) -> LedgerSettings:
    overrides = {"ledger.file": str(file), "ledger.rotate_bytes": rotate}
    policy = middleware.load_policy(None, env={}, dotenv_path=False, overrides=overrides)
    return bind(policy, LedgerSettings)


def big_file(path: Path, lines: int, sessions: int = 500) -> None:
    """``lines`` answers as the journal writes them, over ``sessions`` sessions."""
    usage = '{{"input":3,"cache_read":1000,"cache_write_5m":200,"cache_write_1h":0,"output":20}}'
    line = (
        '{{"time":{time},"session":"session-{session}","format":"anthropic",'
        '"model":"claude-sonnet-5","priced_as":"claude-sonnet-5","billed":'
        + usage
        + ',"without":'
        + usage
        + ',"dollars":0.0008,"dollars_without":0.0008,'
        '"expected_read":1000}}\n'
    )
    with path.open("w", encoding="utf-8") as file:
        for start in range(0, lines, 10_000):
            file.write(
                "".join(
                    line.format(time=1_000 + n, session=n % sessions)
                    for n in range(start, min(start + 10_000, lines))
                )
            )


def peak_reading(path: Path) -> tuple[int, FileLedger]:
    """The peak of memory allocated while the ledger file at ``path`` is read back."""
    tracemalloc.start()
    try:
        ledger = FileLedger.read(str(path))
        return tracemalloc.get_traced_memory()[1], ledger
    finally:
        tracemalloc.stop()


def test_start_reads_a_ledger_file_in_memory_that_does_not_grow_with_it(
    tmp_path: Path,
) -> None:
    """Every allocation traced (tracemalloc): reading ten times the lines takes no more."""
    peaks = {}
    for lines in (2_000, 20_000):
        file = tmp_path / f"ledger-{lines}.jsonl"
        big_file(file, lines)
        peaks[lines], ledger = peak_reading(file)
        total = ledger.total()
        assert total["requests"] == lines and total["sessions"] == 500
        assert total["billed"]["cache_read"] == 1000 * lines and ledger.skipped == 0
    # The sums of 500 sessions, whatever the number of lines: not a record of each line.
    assert peaks[20_000] < 1.25 * peaks[2_000], peaks
    assert peaks[20_000] < 2 * 1024 * 1024, peaks


READER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from middleware.ledger import FileLedger

    def status(field):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])  # kB

    Path("/proc/self/clear_refs").write_text("5")  # the peak resident size starts here
    before = status("VmRSS")
    total = FileLedger.read(sys.argv[1]).total()
    print(total["requests"], status("VmHWM") - before)
    """
)


@pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(), reason="reads the peak resident size of Linux"
)
def test_a_process_reading_200_000_lines_peaks_as_one_reading_20_000(tmp_path: Path) -> None:
    """The issue's file (200,000 lines took 439 MB to read back): how far the resident
    size of a process reading it rises, against one reading a tenth of it (a process
    each; traced allocation by allocation, reading the big one would take minutes)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    risen = {}
    for lines in (20_000, 200_000):
        file = tmp_path / f"ledger-{lines}.jsonl"
        big_file(file, lines)
        said = subprocess.run(
            [sys.executable, "-c", READER, str(file)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        requests, risen[lines] = map(int, said.stdout.split())
        assert requests == lines
        file.unlink()
    assert risen[200_000] <= risen[20_000] + 4 * 1024, risen  # kB: within 4 MB


def record_answers(ledger: Ledger, chosen: LedgerSettings, answers: range) -> None:
    for n in answers:
        ledger.record(
            f"session-{n % 30}",
            "anthropic",
            Usage(n, 1_000, 300, 0, 7),
            ("claude-sonnet-5", "claude-haiku-4-5")[n % 2],
            chosen,
            now=1_000.0 + n,
        )


def test_the_file_rotates_past_its_size_and_is_read_from_the_sums_not_the_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from middleware.cli.app import main

    file = tmp_path / "ledger.jsonl"
    chosen = settings(file)
    ledger = Ledger.open(chosen, records_in())
    record_answers(ledger, chosen, range(300))
    ledger.close(WRITTEN)
    rotated = parts(file)
    assert len(rotated) >= 10 and [n for n, _ in rotated] == list(range(1, len(rotated) + 1))
    # Each part stopped at the first line past the size; the current file is below it.
    longest = max(len(line) for _, part in rotated for line in part.read_bytes().splitlines())
    assert all(ROTATE <= part.stat().st_size <= ROTATE + longest for _, part in rotated)
    assert not file.exists() or file.stat().st_size < ROTATE
    lines = sum(len(list(read_journal(path))) for path in [*(p for _, p in rotated), file])
    assert lines == 300
    # The sums: a line for the totals, one for each session, however many answers.
    assert len(sums_path(file).read_text(encoding="utf-8").splitlines()) == 1 + 30

    def same_as_written(again: FileLedger) -> None:
        assert again.total() == ledger.total() and again.skipped == 0
        for n in range(30):
            assert again.session(f"session-{n}") == ledger.session(f"session-{n}")
        assert again.recent(3) == ledger.recent(3)  # the most recently billed first

    same_as_written(FileLedger.read(str(file)))
    # The history can go: a reading takes the sums and the current file only.
    for _, part in rotated:
        part.unlink()
    same_as_written(FileLedger.read(str(file)))
    restarted = Ledger.open(chosen, records_in())
    record_answers(restarted, chosen, range(300, 600))
    restarted.close(WRITTEN)
    assert len(sums_path(file).read_text(encoding="utf-8").splitlines()) == 1 + 30
    assert FileLedger.read(str(file)).total()["requests"] == 600
    # The command reads the sums and the file the same way, with no proxy running.
    assert main(["ledger", "--file", str(file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["requests"] == 600


def test_a_part_rotated_out_but_not_yet_summed_is_read_at_start(tmp_path: Path) -> None:
    """A process stopped between the rename and writing the sums: the part the sums do
    not name is read at start, and summed at the next rotation."""
    file = tmp_path / "ledger.jsonl"
    chosen = settings(file)
    ledger = Ledger.open(chosen, records_in())
    record_answers(ledger, chosen, range(100))
    ledger.close(WRITTEN)
    first = 100
    if not file.exists():  # the last answer rotated it: one more starts the next file
        ledger = Ledger.open(chosen, ledger.records)
        record_answers(ledger, chosen, range(100, 101))
        ledger.close(WRITTEN)
        first = 101
    last = max(n for n, _ in parts(file))
    file.rename(file.with_name(f"{file.name}.{last + 1}"))  # renamed, never summed
    assert FileLedger.read(str(file)).total() == ledger.total()
    restarted = Ledger.open(chosen, records_in())
    record_answers(restarted, chosen, range(first, 200))
    restarted.close(WRITTEN)
    head = json.loads(sums_path(file).read_text(encoding="utf-8").splitlines()[0])
    assert head["through"] > last + 1
    assert FileLedger.read(str(file)).total()["requests"] == 200


def test_sums_that_cannot_be_read_fall_back_to_the_parts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / "ledger.jsonl"
    chosen = settings(file)
    ledger = Ledger.open(chosen, records_in())
    record_answers(ledger, chosen, range(100))
    ledger.close(WRITTEN)
    sums_path(file).write_text('{"sums": 1, "through": NaN}\n', encoding="utf-8")
    assert FileLedger.read(str(file)).total() == ledger.total()
    assert "does not hold the ledger's sums" in caplog.text


WRITER = textwrap.dedent(
    """
    import sys
    import middleware
    from middleware.ledger import Ledger, LedgerSettings, Usage
    from middleware.policy.settings import bind
    from middleware.records import Records

    file, name, answers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    overrides = {"ledger.file": file, "ledger.rotate_bytes": 4096}
    policy = middleware.load_policy(None, env={}, dotenv_path=False, overrides=overrides)
    chosen = bind(policy, LedgerSettings)
    ledger = Ledger.open(chosen, Records.in_memory())
    for n in range(answers):
        ledger.record(f"{name}-{n % 7}", "anthropic", Usage(1, 10, 0, 0, 1),
                      "claude-sonnet-5", chosen, now=float(n))
    ledger.journal.close(120)
    """
)


def test_two_processes_sharing_a_rotating_file_lose_no_answer(tmp_path: Path) -> None:
    """Two processes append to one file and each rotates it when it finds it full: no
    answer is summed twice, none is written to a part once it is summed."""
    file = tmp_path / "ledger.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(file), name, "1500"], env=env)
        for name in ("a", "b")
    ]
    assert [writer.wait(timeout=300) for writer in writers] == [0, 0]
    assert len(parts(file)) >= 20
    ledger = FileLedger.read(str(file))
    assert ledger.total()["requests"] == 3000 and ledger.skipped == 0
    assert all(
        ledger.session(f"{name}-{n}")["requests"] in (214, 215)  # type: ignore[index]
        for name in "ab"
        for n in range(7)
    )
    on_disk = sum(len(list(read_journal(p))) for p in [*(p for _, p in parts(file)), file])
    assert on_disk == 3000
