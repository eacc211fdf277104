"""The ledger written to a file (ledger.file), read back by the command line and by
``chatcli-mw ledger import``."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from record_builders import records_in

import middleware
from middleware.ledger import FileLedger, Ledger, LedgerSettings, Usage
from middleware.ledger import journal as journal_module
from middleware.ledger.journal import Journal
from middleware.ledger.lines import read_journal
from middleware.policy.settings import bind

#: Seconds a test waits for its ledger file to be written (a loaded machine is slow).
WRITTEN = 120.0


def settings(file: Path) -> LedgerSettings:
    policy = middleware.load_policy(
        None, env={}, dotenv_path=False, overrides={"ledger.file": str(file)}
    )
    return bind(policy, LedgerSettings)


def test_a_ledger_read_back_is_the_ledger_written(tmp_path: Path) -> None:
    file = tmp_path / "deep" / "ledger.jsonl"
    chosen = settings(file)
    ledger = Ledger.open(chosen, records_in())
    ledger.record("a", "anthropic", Usage(10, 2_000, 300, 0, 7), "claude-opus-5", chosen, now=1.5)
    ledger.record("b", "openai", Usage(5, 1_024, 0, 0, 3), "gpt-4.1", chosen, now=2.5)
    ledger.record("a", "anthropic", None, None, chosen, now=3.5)  # its usage was not read
    ledger.record(None, "openai", Usage(1, 0, 0, 0, 1), "llama", chosen, now=4.5)
    ledger.close(WRITTEN)
    assert file.stat().st_mode & 0o777 == 0o600
    read = FileLedger.read(str(file))  # what the file holds is what was billed
    for session in ("a", "b"):
        assert read.session(session) == ledger.session(session)
    assert read.total() == ledger.total() and read.skipped == 0
    again = Ledger.open(chosen, records_in())  # the next process on the same file
    again.record("b", "openai", Usage(1, 0, 0, 0, 1), "gpt-4.1", chosen, now=9.0)
    again.close(WRITTEN)
    third = FileLedger.read(str(file))
    assert third.session("b")["requests"] == 2  # type: ignore[index]
    assert len(list(read_journal(file))) == 5


def test_lines_that_are_not_answers_are_skipped_and_counted(tmp_path: Path) -> None:
    file = tmp_path / "ledger.jsonl"
    good = (
        '{"time":1,"session":"s","format":"anthropic","model":"m","priced_as":null,'
        '"billed":{"input":4},"without":{"input":9},"dollars":null,'
        '"dollars_without":null}'
    )
    file.write_text("\n".join([
        good, "not json", '{"time": "yesterday"}', "[1, 2]", "",
        '{"time":2,"session":"s","billed":{"input":-3},"without":{}}',
        '{"time":3,"session":"s","unread":true}', '{"time":4,"session":"s","billed":',
    ]) + "\n", encoding="utf-8")  # fmt: skip
    ledger = FileLedger.read(str(file))
    assert ledger.skipped == 5
    session = ledger.session("s")
    assert session is not None and session["requests"] == 2 and session["unread"] == 1
    assert session["billed"]["input"] == 4 and session["without"]["input"] == 9


def test_a_file_that_cannot_be_written_is_logged_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = Journal(tmp_path)  # a directory
    with caplog.at_level(logging.ERROR, logger="middleware.ledger.journal"):
        journal.write({"time": 1})
        journal.write({"time": 2})
        journal.close()
    assert journal.failed == 2
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        f"cannot write the ledger file {tmp_path}"
    ]


def test_a_stalled_disk_drops_lines_past_the_limit_instead_of_holding_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "MAX_WAITING", 3)
    release = threading.Event()
    written: list[bytes] = []

    def stalled(descriptor: int, data: bytes) -> int:
        release.wait(10)
        written.append(data)
        return len(data)

    monkeypatch.setattr(journal_module.os, "write", stalled)
    journal = Journal(tmp_path / "ledger.jsonl")
    for n in range(10):
        journal.write({"time": n})
    assert journal.dropped >= 6  # one in the writer's hands, three waiting
    release.set()
    journal.close()
    assert len(written) == 10 - journal.dropped


def test_the_ledger_command_draws_a_ledger_file(tmp_path: Path) -> None:
    from middleware.cli.app import main

    file = tmp_path / "ledger.jsonl"
    chosen = settings(file)
    ledger = Ledger.open(chosen, records_in())
    for n in range(12):
        ledger.record(
            "s",
            "anthropic",
            Usage(10, 1_000 * n, 500, 0, 20),
            "claude-opus-5",
            chosen,
            now=float(n),
        )
    ledger.record("other", "anthropic", Usage(5, 0, 0, 0, 1), "claude-opus-5", chosen, now=99.0)
    ledger.close(WRITTEN)
    picture = tmp_path / "ledger.png"
    assert main(["ledger", "s", "--file", str(file), "--plot", str(picture)]) == 0
    assert picture.read_bytes().startswith(b"\x89PNG")
    assert main(["ledger", "nobody", "--file", str(file), "--plot", str(picture)]) == 2
    assert main(["ledger", "--url", "http://127.0.0.1:9", "--plot", str(picture)]) == 2


#: Answers written to a ledger file by a process whose files may not grow past a few bytes
#: more than the file holds (RLIMIT_FSIZE, SIGXFSZ ignored: a write past it is cut short,
#: the next fails with EFBIG, as on a full disk), then room again and ten more answers.
FULL_DISK = textwrap.dedent(
    """
    import resource, signal, sys
    from pathlib import Path
    import middleware
    from middleware.ledger import Ledger, LedgerSettings, Usage
    from middleware.policy.settings import bind
    from middleware.records import Records

    file = Path(sys.argv[1])
    policy = middleware.load_policy(None, env={}, dotenv_path=False,
                                    overrides={"ledger.file": str(file)})
    chosen = bind(policy, LedgerSettings)

    def answers(session, count):
        ledger = Ledger.open(chosen, Records.in_memory())
        for n in range(count):
            ledger.record(f"{session}-{n}", "anthropic", Usage(10, 1_000, 0, 0, 5),
                          "claude-sonnet-5", chosen, now=float(n))
        ledger.close(120)

    answers("before", 3)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (file.stat().st_size + 40, hard))
    answers("full", 2)  # the first cut short after 40 bytes, the second refused
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    answers("after", 10)
    """
)


def read_back(file: Path, capsys: pytest.CaptureFixture[str]) -> tuple[list[str], int]:
    """The sessions of the answers the ledger's reader finds in ``file``, and how many
    answers ``chatcli-mw ledger --file`` counts."""
    from middleware.cli.app import main

    sessions = [record["session"] for record in read_journal(file)]
    capsys.readouterr()
    assert main(["ledger", "--file", str(file), "--json"]) == 0
    counted = json.loads(capsys.readouterr().out)["total"]["requests"]
    return sessions, counted


def test_a_full_disk_leaves_no_half_line_to_swallow_the_next_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The answer cut short is lost (and logged), but none after it: the half line it
    left swallowed the next answer written (9 of the 10 after it were read)."""
    pytest.importorskip("resource", reason="RLIMIT_FSIZE is POSIX")
    file = tmp_path / "ledger.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writer = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert writer.returncode == 0, writer.stderr
    assert "cannot write the ledger file" in writer.stderr  # said, not silent
    sessions, counted = read_back(file, capsys)
    assert [s for s in sessions if s.startswith("after")] == [f"after-{n}" for n in range(10)]
    assert sessions[:3] == ["before-0", "before-1", "before-2"] and counted == len(sessions)
    assert file.read_bytes().endswith(b"\n")


def test_a_line_another_writer_left_unfinished_swallows_no_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A process killed mid-line (or on a disk that filled under it) leaves a line with
    no end: the next answer appended starts on a line of its own."""
    file = tmp_path / "ledger.jsonl"
    file.write_bytes(b'{"time":1,"session":"killed","format":"anthropic","bil')
    file.chmod(0o600)
    chosen = settings(file)
    ledger = Ledger.open(chosen, records_in())
    for n in range(10):
        ledger.record(
            f"after-{n}",
            "anthropic",
            Usage(10, 1_000, 0, 0, 5),
            "claude-sonnet-5",
            chosen,
            now=float(n),
        )
    ledger.close(WRITTEN)
    sessions, counted = read_back(file, capsys)
    assert sessions == [f"after-{n}" for n in range(10)] and counted == 10
