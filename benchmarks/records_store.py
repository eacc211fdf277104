"""What the records stores sustain on this machine (issue 44, item 8): a SQLite file and a
PostgreSQL server (Debian's, started here in a temporary folder and stopped at the end).

(a) Writes: 50 conversations put answers (and, unless ``--no-requests``, the console's
    record of each request, ``--record-bytes`` of JSON) through :class:`Records` and its
    :class:`RecordWriter`, as the proxy does, at a rate that doubles each step, until the
    writer no longer keeps up (rows still waiting at the step's end more than half a
    second of what was put): rows written per second, the rows and bytes waiting at the
    most, and the CPU per row of this process and of PostgreSQL's.
(b) Reads: the ``/sessions``-style reads (the latest 100 sessions, the totals, a session,
    its latest 25 requests, the latest 100 sessions of a tag, the sums by day) at 10^4,
    10^5 and 10^6 answers (and as many requests) spread over 10^4 sessions and 30 days,
    written with :meth:`RecordStore.write` in large batches: the median time of each,
    the slowest, and the process's peak resident memory over them. ``--explain`` prints
    each read's plan at the largest size.

    python benchmarks/records_store.py [--stores sqlite,postgresql] [--parts writes,reads]
        [--sizes 10000,100000,1000000] [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import sqlalchemy as sa  # noqa: E402

from benchmarks.postgres_server import SETTINGS, postgres  # noqa: E402
from benchmarks.processes import cpu_seconds, descendants  # noqa: E402
from middleware.proxy.console import paging  # noqa: E402
from middleware.proxy.console.pages import MAX_LISTED, PAGE  # noqa: E402
from middleware.records import (  # noqa: E402
    AnswerRow,
    Records,
    RecordSettings,
    RecordStore,
    RequestRow,
    queries,
)
from middleware.records.queries import Filters  # noqa: E402

STORES = ("sqlite", "postgresql")
PARTS = ("writes", "reads")
#: Seconds' worth of rows that may wait at a step's end, beyond an outbox's linger, for the
#: writer to count as keeping up.
KEPT_UP_SECONDS = 0.5
#: Bytes the writer may hold (ledger.held_bytes): large, so that nothing is dropped and
#: the queue's growth shows.
HELD_BYTES = 2 * 1024**3
MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5", "gpt-5")
AGENTS = ("claude-code", "codex", "gemini-cli")
TEAMS = ("infra", "web", "data", "ml", "mobile", "search", "ads", "security")
DAY = 86400.0


@dataclass
class Database:
    """A records database: its URL, and PostgreSQL's main process (``None``: SQLite)."""

    url: str
    pid: int | None = None

    def cpu(self) -> float:
        return 0.0 if self.pid is None else cpu_seconds(descendants(self.pid))


@contextmanager
def database(store: str, work: Path) -> Iterator[Database]:
    """A new empty database of ``store``."""
    if store == "sqlite":
        path = work / f"records-{time.monotonic_ns()}.sqlite"
        yield Database(f"sqlite:///{path}")
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    with postgres() as server:
        yield Database(server.url, server.pid)


# -- the rows ----------------------------------------------------------------------------------


def record_bytes(size: int, n: int) -> bytes:
    """A console record of about ``size`` bytes, as JSON (what each step did)."""
    head = b'{"n":%d,"actions":[' % n
    action = b'{"step":"spill","kind":"tool_result","before":41234,"after":812},'
    body = action * max(0, (size - len(head) - 2) // len(action))
    return head + body.rstrip(b",") + b"]}"


def answer(key: str, s: int, when: float, n: int, *, request: str | None) -> AnswerRow:
    """An answer of the ``s``-th session as the ledger bills one, varied by ``n``; the
    session's agent, caller and tags follow from ``s``."""
    return AnswerRow(
        key, when, session_name(s), "bench", "anthropic",
        billed={"input": 40 + n % 97, "cache_read": 30_000 + n % 4099, "output": 300 + n % 211,
                "cache_write_5m": 1_200 + n % 307},
        without={"input": 31_000 + n % 4099, "output": 300 + n % 211},
        model=MODELS[n % len(MODELS)], priced_as=MODELS[n % len(MODELS)],
        dollars=0.012 + (n % 13) / 1000, dollars_without=0.09 + (n % 17) / 1000,
        expected_read=30_000, request=request, agent=AGENTS[s % len(AGENTS)],
        caller=f"{s % 200:016x}", tags=(("team", TEAMS[s % len(TEAMS)]), ("project", f"p{s % 50}")),
    )  # fmt: skip


def session_name(s: int) -> str:
    return f"s{s:05d}"


def request_row(key: str, session: str, when: float, record: bytes) -> RequestRow:
    return RequestRow(key, session, when, "bench", record, agent="claude-code",
                      source="claude-code", format="anthropic", repairs=1, spills=2)  # fmt: skip


# -- (a) writes --------------------------------------------------------------------------------


@dataclass
class Step:
    """One rate of answers put by the conversations, and what the writer did with it."""

    offered: float
    answers_put: int
    rows_put: int
    rows_written: int
    seconds: float
    #: Rows that reached the database per second during the step.
    written_per_second: float
    #: Rows put and not in the database yet, and their bytes, at the most.
    peak_rows: int
    peak_bytes: int
    waiting_at_end: int
    kept_up: bool
    #: CPU of this process (the conversations and the writer) and of PostgreSQL, per row.
    cpu_ms_per_row: float
    database_cpu_ms_per_row: float
    load: float


class Conversations:
    """``count`` threads, each putting the answers of a conversation of its own at an
    equal share of a rate (one answer and, with ``requests``, its request's record)."""

    def __init__(self, records: Records, count: int, requests: bool, size: int) -> None:
        self.records = records
        self.count = count
        self.requests = requests
        self.record = record_bytes(size, 0)
        self.answers = 0
        self.rows = 0
        self._keys = itertools.count()
        self._lock = threading.Lock()

    def run(self, rate: float, seconds: float) -> None:
        """Put answers at ``rate`` a second in all for ``seconds``."""
        start = time.monotonic()
        threads = [
            threading.Thread(target=self._one, args=(c, rate / self.count, start, seconds))
            for c in range(self.count)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _one(self, conversation: int, rate: float, start: float, seconds: float) -> None:
        session = session_name(conversation)
        due = start + (conversation / self.count) / rate  # spread over the first interval
        while due < start + seconds:
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            n = next(self._keys)
            request = f"q{n}" if self.requests else None
            now = time.time()
            self.records.put(answer(f"a{n}", conversation, now, n, request=request))
            put = 1
            if request is not None:
                self.records.put(request_row(request, session, now, self.record))
                put = 2
            with self._lock:
                self.answers += 1
                self.rows += put
            due += 1 / rate


def written(records: Records) -> int:
    """Rows the database has (through the outbox, for a server)."""
    counts = records.outbox.counts if records.outbox is not None else records.writer.counts
    return counts.written


def writes(
    db: Database, args: argparse.Namespace, log: Callable[[str], None]
) -> tuple[list[Step], float]:
    """Steps of a rate doubling from ``args.rate`` until the writer falls behind; the
    seconds the last step's rows took to drain."""
    settings = RecordSettings(db.url, HELD_BYTES, None, None, "bench")
    records = Records.open(settings, replica="bench")
    conversations = Conversations(records, args.conversations, args.requests, args.record_bytes)
    steps: list[Step] = []
    rate = args.rate
    drained = 0.0
    try:
        while rate <= args.max_rate:
            step = _step(records, conversations, db, rate, args.seconds)
            steps.append(step)
            log(f"  {rate:.0f} answers/s offered: {step.written_per_second:.0f} rows/s written, "
                f"{step.peak_rows} rows waiting at most, {step.waiting_at_end} at the end, "
                f"{step.cpu_ms_per_row:.2f} ms CPU a row here, "
                f"{step.database_cpu_ms_per_row:.2f} in the database")  # fmt: skip
            start = time.monotonic()
            records.writer.flush(600)
            drained = time.monotonic() - start
            if not step.kept_up:
                break
            rate *= 2
    finally:
        records.close(60)
    return steps, drained


def _step(
    records: Records, conversations: Conversations, db: Database, rate: float, seconds: float
) -> Step:
    peak = {"rows": 0, "bytes": 0}
    done = threading.Event()
    answers0, rows0, written0 = conversations.answers, conversations.rows, written(records)

    def watch() -> None:
        while not done.wait(0.02):
            waiting = conversations.rows - written(records)
            held = records.writer.held + records.writer.sink.held
            peak["rows"] = max(peak["rows"], waiting)
            peak["bytes"] = max(peak["bytes"], held)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    cpu, database_cpu = time.process_time(), db.cpu()
    start = time.monotonic()
    conversations.run(rate, seconds)
    took = time.monotonic() - start
    in_database = written(records) - written0
    used, database_used = time.process_time() - cpu, db.cpu() - database_cpu
    done.set()
    watcher.join()
    rows = conversations.rows - rows0
    waiting = conversations.rows - written(records)
    # What an outbox holds on purpose: up to its linger's worth of rows (a server's).
    linger = records.outbox.linger_seconds if records.outbox is not None else 0.0
    return Step(
        offered=rate,
        answers_put=conversations.answers - answers0,
        rows_put=rows,
        rows_written=in_database,
        seconds=took,
        written_per_second=in_database / took,
        peak_rows=peak["rows"],
        peak_bytes=peak["bytes"],
        waiting_at_end=waiting,
        kept_up=waiting <= max(rows / took * (KEPT_UP_SECONDS + linger), 1),
        cpu_ms_per_row=used * 1e3 / max(in_database, 1),
        database_cpu_ms_per_row=database_used * 1e3 / max(in_database, 1),
        load=os.getloadavg()[0],
    )


# -- (b) reads ---------------------------------------------------------------------------------


def fill(store: RecordStore, have: int, want: int, args: argparse.Namespace) -> tuple[int, float]:
    """Bring the answers (and requests) from ``have`` to ``want``, each session getting
    the same number more: ``args.sessions`` of them over 30 days. Rows written, seconds."""
    sessions = args.sessions
    each = max((want - have) // sessions, 1)
    first = have // sessions
    record = record_bytes(args.record_bytes, 0) if args.requests else b""
    now = time.time()
    start = time.monotonic()
    count = 0
    per_batch = max(args.batch // each, 1)
    for low in range(0, sessions, per_batch):
        answers: list[AnswerRow] = []
        requests: list[RequestRow] = []
        for s in range(low, min(low + per_batch, sessions)):
            session = session_name(s)
            begins = now - 30 * DAY + (s * 7919 % sessions) / sessions * 30 * DAY
            for j in range(first, first + each):
                when = begins + j * 20.0
                request = f"q{s}.{j}" if args.requests else None
                answers.append(answer(f"a{s}.{j}", s, when, s * 131 + j, request=request))
                if request is not None:
                    requests.append(request_row(request, session, when, record))
        store.write(answers, requests)
        count += len(answers)
    return count, time.monotonic() - start


#: The reads a page or ``/sessions`` makes, by name.
READS: dict[str, Callable[[RecordStore, str], object]] = {
    "recent(100)": lambda store, _: queries.recent(store, 100),
    "totals": lambda store, _: queries.totals(store),
    "session": queries.session,
    "requests(session, 25)": lambda store, name: queries.requests(store, name, limit=25),
    "recent(100, tag team=infra)": lambda store, _: queries.recent(
        store, 100, Filters(tags=(("team", "infra"),))
    ),
    "by day": lambda store, _: queries.by(store, "day"),
    # The console's own reads: its list of sessions (1,000 at most) and a session's page.
    "console list": lambda store, _: paging.sessions_list(store, MAX_LISTED),
    "console page": lambda store, name: paging.session_page(
        store, name, paging.Asked(PAGE), "kept"
    ),
}


@dataclass
class Reads:
    """The reads at one size: milliseconds of each (median, slowest), and memory."""

    answers: int
    fill_seconds: float
    median_ms: dict[str, float]
    slowest_ms: dict[str, float]
    rss_mb_before: float
    peak_rss_mb: float
    database_mb: float
    load: float
    plans: dict[str, list[str]] = field(default_factory=dict)


def _rss(field_name: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _reset_peak_rss() -> None:
    """Start the process's peak resident memory (VmHWM) again from what it holds now."""
    Path("/proc/self/clear_refs").write_text("5")


def reads(store: RecordStore, answers: int, args: argparse.Namespace) -> Reads:
    session = session_name(args.sessions // 2)
    times: dict[str, list[float]] = {}
    rss_before = _rss("VmRSS")
    _reset_peak_rss()
    for _ in range(args.repeats):
        for name, read in READS.items():
            start = time.perf_counter()
            read(store, session)
            times.setdefault(name, []).append((time.perf_counter() - start) * 1e3)
    return Reads(
        answers=answers,
        fill_seconds=0.0,
        median_ms={name: statistics.median(values) for name, values in times.items()},
        slowest_ms={name: max(values) for name, values in times.items()},
        rss_mb_before=rss_before,
        peak_rss_mb=_rss("VmHWM"),
        database_mb=database_mb(store),
        load=os.getloadavg()[0],
    )


def database_mb(store: RecordStore) -> float:
    """The database's size on disk."""
    with store.connection() as connection:
        if store.dialect == "sqlite":
            pages = connection.exec_driver_sql("PRAGMA page_count").scalar_one()
            size = connection.exec_driver_sql("PRAGMA page_size").scalar_one()
            return float(pages * size) / 1e6
        found = connection.execute(sa.text("SELECT pg_database_size(current_database())"))
        return float(found.scalar_one()) / 1e6


def plans(store: RecordStore, session: str) -> dict[str, list[str]]:
    """Each read's statements and the database's plan of each."""
    found: dict[str, list[str]] = {}
    caught: list[tuple[str, Any]] = []

    def catch(_c: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        caught.append((statement, parameters))

    sa.event.listen(store.engine, "before_cursor_execute", catch)
    try:
        for name, read in READS.items():
            caught.clear()
            read(store, session)
            lines = []
            for statement, parameters in list(caught):
                if not statement.lstrip().upper().startswith("SELECT"):
                    continue
                explain = "EXPLAIN QUERY PLAN " if store.dialect == "sqlite" else "EXPLAIN "
                with store.engine.connect() as connection:
                    rows = connection.exec_driver_sql(explain + statement, parameters).all()
                lines.append(" ".join(statement.split())[:160])
                lines += ["    " + " ".join(str(part) for part in row) for row in rows]
            found[name] = lines
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", catch)
    return found


def read_sizes(db: Database, args: argparse.Namespace, log: Callable[[str], None]) -> list[Reads]:
    store = RecordStore.open(db.url)
    results = []
    have = 0
    try:
        for size in args.sizes:
            count, took = fill(store, have, size, args)
            have += count
            if store.dialect == "postgresql":
                with store.engine.connect().execution_options(
                    isolation_level="AUTOCOMMIT"
                ) as connection:
                    connection.exec_driver_sql("VACUUM ANALYZE")
            log(f"  {have} answers written in {took:.1f} s")
            found = reads(store, have, args)
            found.fill_seconds = took
            if args.explain and size == args.sizes[-1]:
                found.plans = plans(store, session_name(args.sessions // 2))
            results.append(found)
            log("  " + ", ".join(f"{n} {ms:.1f} ms" for n, ms in found.median_ms.items())
                + f"; peak RSS {found.peak_rss_mb:.0f} MB")  # fmt: skip
    finally:
        store.close()
    return results


# -- the report --------------------------------------------------------------------------------


def writes_table(results: dict[str, tuple[list[Step], float]]) -> str:
    lines = [
        "| store | answers/s offered | rows/s written | rows waiting at most (MB) "
        "| waiting at the end | kept up | CPU a row here / in PostgreSQL | load |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for store, (steps, _) in results.items():
        for s in steps:
            lines.append(
                f"| {store} | {s.offered:.0f} | {s.written_per_second:.0f} "
                f"| {s.peak_rows} ({s.peak_bytes / 1e6:.1f}) | {s.waiting_at_end} "
                f"| {'yes' if s.kept_up else '**no**'} "
                f"| {s.cpu_ms_per_row:.2f} / {s.database_cpu_ms_per_row:.2f} ms | {s.load:.1f} |"
            )
    return "\n".join(lines)


def reads_table(results: dict[str, list[Reads]]) -> str:
    names = list(READS)
    lines = [
        "| store | answers | " + " | ".join(names) + " | peak RSS (before) | database | load |",
        "|---|---:|" + "---:|" * len(names) + "---:|---:|---:|",
    ]
    for store, found in results.items():
        for r in found:
            cells = " | ".join(
                f"{r.median_ms[n]:.1f} ({r.slowest_ms[n]:.0f})" if r.median_ms[n] < 100 else
                f"{r.median_ms[n]:.0f} ({r.slowest_ms[n]:.0f})" for n in names
            )  # fmt: skip
            lines.append(
                f"| {store} | {r.answers:,} | {cells} | {r.peak_rss_mb:.0f} MB "
                f"({r.rss_mb_before:.0f}) | {r.database_mb:,.0f} MB | {r.load:.1f} |"
            )
    return "\n".join(lines)


# -- main --------------------------------------------------------------------------------------


def _choices(text: str, known: Sequence[str]) -> list[str]:
    chosen = [word.strip() for word in text.split(",") if word.strip()]
    if not chosen or any(word not in known for word in chosen):
        raise argparse.ArgumentTypeError(f"some of {', '.join(known)}, not {text!r}")
    return chosen


def options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--stores", type=lambda t: _choices(t, STORES), default=list(STORES))
    add("--parts", type=lambda t: _choices(t, PARTS), default=list(PARTS))
    add("--conversations", type=int, default=50, help="conversations putting answers at once")
    add("--rate", type=float, default=25.0, help="answers a second at the first step")
    add("--max-rate", type=float, default=51_200.0, help="the last step's rate, at most")
    add("--seconds", type=float, default=10.0, help="each step's length")
    add("--no-requests", dest="requests", action="store_false",
        help="answers only, without the console's record of each request")  # fmt: skip
    add("--record-bytes", type=int, default=1000, help="a request's console record")
    add("--sizes", type=lambda t: [int(n) for n in t.split(",")],
        default=[10_000, 100_000, 1_000_000], help="answers the reads are timed at")  # fmt: skip
    add("--sessions", type=int, default=10_000, help="sessions the answers are spread over")
    add("--batch", type=int, default=20_000, help="answers written in one transaction")
    add("--repeats", type=int, default=7, help="times each read is timed (the median)")
    add("--explain", action="store_true", help="print each read's plan at the largest size")
    add("--json", type=Path, help="also write the figures to this file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = options(argv)

    def log(line: str) -> None:
        print(line, flush=True)

    load_before = os.getloadavg()
    started = time.monotonic()
    log(f"{os.cpu_count()} CPUs, load {load_before[0]:.2f}; PostgreSQL {', '.join(SETTINGS)}, "
        "otherwise its defaults; SQLite in WAL mode, synchronous=NORMAL")  # fmt: skip
    written_by: dict[str, tuple[list[Step], float]] = {}
    read_by: dict[str, list[Reads]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(work / "state")  # the outbox's file
        for store in args.stores:
            if "writes" in args.parts:
                also = f" and {args.record_bytes}-byte requests" if args.requests else ""
                log(f"(a) {store}: {args.conversations} conversations putting answers{also}")
                with database(store, work) as db:
                    written_by[store] = writes(db, args, log)
            if "reads" in args.parts:
                log(f"(b) {store}: reads at {', '.join(f'{n:,}' for n in args.sizes)} answers")
                with database(store, work) as db:
                    read_by[store] = read_sizes(db, args, log)
    load_after = os.getloadavg()
    took = time.monotonic() - started
    if written_by:
        log("")
        log(writes_table(written_by))
    if read_by:
        log("")
        log("Milliseconds, median of " + str(args.repeats) + " (slowest):")
        log(reads_table(read_by))
        for store, found in read_by.items():
            for name, lines in found[-1].plans.items():
                log(f"\n{store}, {name}:\n" + "\n".join(lines))
    log(f"\n{os.cpu_count()} CPUs, Python {platform.python_version()}, load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after, {took / 60:.1f} min")  # fmt: skip
    if args.json is not None:
        figures = {
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "command": " ".join(["benchmarks/records_store.py", *(argv or sys.argv[1:])]),
            "load": [load_before, load_after],
            "writes": {s: [asdict(step) for step in steps] for s, (steps, _) in written_by.items()},
            "reads": {s: [asdict(r) for r in found] for s, found in read_by.items()},
        }
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
