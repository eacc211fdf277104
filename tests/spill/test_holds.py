"""Holds (issue 26, item 6): a process serving a session from an object store says in the
store until when it may still use it, so ``gc`` run with another policy never removes a
session in use; and a folder removed under a process that goes on writing gets its marker
back, so what it writes stays something ``gc`` removes later. Against moto's S3 server,
with the clocks injected (the store's own times are real: the test's POSIX clock starts at
the real time and moves forward)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from object_store import CREDENTIALS, S3Server
from session_builders import tool_session

from middleware import load_policy
from middleware.cli.app import main
from middleware.conversations import engine
from middleware.conversations.sessions import SessionPool
from middleware.plugin.host import PluginHost
from middleware.policy import Policy
from middleware.policy.settings import bind
from middleware.spill import SpillSettings, retention
from middleware.spill.holds import CHECK_SECONDS, MARK_SECONDS
from middleware.spill.layout import HOLD_PREFIX, MARKER, held_until
from middleware.spill.objects import ObjectRoot
from middleware.spill.retention import collect, forget
from middleware.spill.stores import object_root

pytest.importorskip("s3fs", reason="the object-store tests need the [s3] extra")

#: The calls that reach the store (each one request).
STORE_CALLS = frozenset({"pipe_file", "cat_file", "rm_file", "rm", "find", "info", "exists"})
OUTPUT = "".join(f"step {n}: compiled module {n}, 0 warnings\n" for n in range(3000))


class Clocks:
    """A root's two clocks, moved by the test together."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.wall = time.time()

    def monotonic(self) -> float:
        return self.now

    def posix(self) -> float:
        return self.wall

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.wall += seconds


class Counting:
    """An fsspec filesystem that records the calls that reach the store: (call, name)."""

    def __init__(self, fs: Any) -> None:
        self._fs = fs
        self.calls: list[tuple[str, str]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._fs, name)
        if name not in STORE_CALLS:
            return attr

        def counted(path: Any, *args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, _short(path)))
            return attr(path, *args, **kwargs)

        return counted

    def take(self) -> list[tuple[str, str]]:
        calls, self.calls = self.calls, []
        return calls


def _short(path: Any) -> str:
    """A path as the test names it: ``marker``, ``hold``, a result's key, else its name."""
    name = str(path).rsplit("/", 1)[-1]
    if name == MARKER:
        return "marker"
    if name.startswith(HOLD_PREFIX):
        return "hold"
    return name if name.startswith("chatcli-agent-") else name.split("-", 1)[0]


def gc_root(s3: S3Server, bucket: str, prefix: str) -> ObjectRoot:
    """The root as a ``gc`` in a process of its own sees it."""
    return ObjectRoot(s3.filesystem(), f"{bucket}/{prefix}", retry_after=0)


def stored(s3: S3Server, bucket: str, prefix: str) -> list[str]:
    """The keys of the objects under ``prefix`` (s3fs's ``find`` names an empty prefix)."""
    listing = s3.filesystem().call_s3("list_objects_v2", Bucket=bucket, Prefix=f"{prefix}/")
    return sorted(item["Key"] for item in listing.get("Contents", []))


def names(folders: list[Any]) -> list[str]:
    return [folder.name for folder in folders]


@pytest.fixture
def serving(
    s3: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[SessionPool, Policy, ObjectRoot, Clocks]]:
    """A proxy's session pool whose sessions idle 2 h, spilling to ``s3://bucket/held``, with
    its clocks (the pool's and its store's) injected."""
    policy = load_policy(
        None,
        overrides=s3.policy(f"s3://{bucket}/held", **{"proxy.session_idle_seconds": 7200}),
        dotenv_path=False,
    )
    clocks = Clocks()
    root = object_root(bind(policy, SpillSettings))
    monkeypatch.setattr(root, "_clock", clocks.monotonic)
    monkeypatch.setattr(root.holds, "_clock", clocks.monotonic)
    monkeypatch.setattr(root.holds, "_wall", clocks.posix)
    monkeypatch.setattr(root, "_fs", Counting(root._fs))
    pool = SessionPool(PluginHost.create(load_entrypoints=False), 7200, clocks.monotonic)
    yield pool, policy, root, clocks
    pool.close()
    root.settle(30)


def test_gc_with_a_shorter_idle_leaves_a_session_a_proxy_serves_and_says_so(
    serving: tuple[SessionPool, Policy, ObjectRoot, Clocks],
    s3: S3Server,
    bucket: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    pool, policy, _, clocks = serving
    state = pool.conversation("default", policy, "live")
    result = engine.process(state, tool_session(("bash", OUTPUT)))
    (spilled,) = [a.detail["path"] for a in result.report.actions if a.kind == "spilled"]
    # gc in a process of its own, with a policy whose sessions idle 60 s, 10 minutes later
    gc = gc_root(s3, bucket, "held")
    later = clocks.wall + 600
    with caplog.at_level(logging.INFO, logger="middleware.spill.retention"):
        dry = collect(gc, 120, now=later, dry_run=True)
        done = collect(gc, 120, now=later)
    assert dry.removed == [] and done.removed == []
    assert names(dry.held) == names(done.held) == ["chatcli-agent-live"]
    held = done.held[0]
    assert held.files == 1
    assert held.held_until == pytest.approx(clocks.wall + 7200 + MARK_SECONDS, abs=2)
    assert "left s3://" in caplog.text and "a process serving it may use it until" in caplog.text
    key = gc.key_of(spilled)
    assert key is not None and gc.read(key.folder, key.name) == OUTPUT
    # the hold ends (the proxy has not used the session for its own idle horizon): removed
    assert held.held_until is not None
    gone = collect(gc, 120, now=held.held_until + 1)
    assert names(gone.removed) == ["chatcli-agent-live"] and gone.held == []
    assert stored(s3, bucket, "held") == []


def test_a_session_in_use_keeps_its_hold_while_it_saves_nothing_new(
    serving: tuple[SessionPool, Policy, ObjectRoot, Clocks], s3: S3Server, bucket: str
) -> None:
    """Requests every 30 min for 6 h, one spill at the start: the hold is renewed as the
    requests go on (about once an hour), never lapses, and costs no store call otherwise."""
    pool, policy, root, clocks = serving
    counting: Counting = root._fs
    history = tool_session(("bash", OUTPUT))
    engine.process(pool.conversation("default", policy, "busy"), history)
    root.settle(30)
    assert sorted(counting.take()) == sorted(
        [("pipe_file", "marker"), ("pipe_file", "hold"), ("cat_file", "c0"), ("pipe_file", "c0")]
    )
    gc = gc_root(s3, bucket, "held")
    per_request = []
    for _ in range(12):
        clocks.advance(1800)
        engine.process(pool.conversation("default", policy, "busy"), history)
        root.settle(30)
        per_request.append(counting.take())
        found = gc.sessions()
        assert [f.held_at(clocks.wall) for f in found] == [True]  # never lapses
        assert collect(gc, 120, now=clocks.wall).removed == []
        holds = [p for p in stored(s3, bucket, "held") if HOLD_PREFIX in p]
        assert len(holds) == 1  # the previous one is removed as the next is written
    # one check that the result written first is still in a folder gc sees, then a new
    # hold (marker, hold, removal of the previous one) each time the last would end within
    # the idle horizon: 6 h of use, 4 renewals; every other request reaches no store
    renewal = [("pipe_file", "marker"), ("pipe_file", "hold"), ("rm_file", "hold")]
    assert per_request[0] == [("cat_file", "hold")]
    assert [calls for calls in per_request[1:] if calls] == [renewal] * 4
    assert sum(1 for calls in per_request if not calls) == 7
    # the requests stop: the hold ends at most MARK_SECONDS after the pool lets it go
    last_use = clocks.wall
    (folder,) = gc.sessions()
    assert folder.held_until is not None
    assert last_use + 7200 <= folder.held_until <= last_use + 7200 + MARK_SECONDS + 1
    assert names(collect(gc, 120, now=folder.held_until + 1).removed) == ["chatcli-agent-busy"]


def test_a_session_that_spills_nothing_has_no_folder_hold_or_store_call(
    serving: tuple[SessionPool, Policy, ObjectRoot, Clocks], s3: S3Server, bucket: str
) -> None:
    """Issue 38, item 4: a session whose outputs all fit is never written to the store (no
    marker, no hold) through its requests, its idle hours and its end, and the listing,
    ``gc`` and ``DELETE`` (forget) take the folder it does not have."""
    pool, policy, root, clocks = serving
    counting: Counting = root._fs
    history = tool_session(("bash", "3 files\n"))
    for _ in range(3):
        engine.process(pool.conversation("default", policy, "quiet"), history)
        clocks.advance(1800)
    assert pool.end("quiet") == 1
    root.settle(30)
    assert counting.take() == [] and stored(s3, bucket, "held") == []
    gc = gc_root(s3, bucket, "held")
    assert gc.sessions() == [] and collect(gc, 0, now=clocks.wall).removed == []
    assert forget(gc, "quiet") is False


def test_a_folder_removed_under_a_writing_process_gets_its_marker_back(
    s3: S3Server, bucket: str
) -> None:
    clocks = Clocks()
    counting = Counting(s3.filesystem())
    root = ObjectRoot(
        counting, f"{bucket}/w", retry_after=0, clock=clocks.monotonic, wall=clocks.posix
    )
    store = root.workspace("live", hold=7200)
    first = store.save("r1", "one")
    assert counting.take() == [
        ("pipe_file", "marker"),
        ("pipe_file", "hold"),
        ("cat_file", "r1"),
        ("pipe_file", "r1"),
    ]
    for n in range(2, 6):
        clocks.advance(5)
        store.save(f"r{n}", f"text {n}")
    # a GET and a PUT per new result: nothing for the marker within CHECK_SECONDS
    assert counting.take() == [
        c for n in range(2, 6) for c in [("cat_file", f"r{n}"), ("pipe_file", f"r{n}")]
    ]
    # another replica ends the session (DELETE /sessions/live) while this one goes on
    other = gc_root(s3, bucket, "w")
    assert forget(other, "live")
    assert other.sessions() == []
    clocks.advance(CHECK_SECONDS)
    store.save("r6", "six")
    assert counting.take() == [
        ("cat_file", "r6"),
        ("pipe_file", "r6"),  # the result
        ("cat_file", "hold"),
        ("find", "chatcli-agent-live"),  # the check: gone, r6 left
        ("pipe_file", "marker"),
        ("pipe_file", "hold"),  # marked again
    ]
    (folder,) = other.sessions()
    assert folder.name == "chatcli-agent-live" and folder.files == 1 and folder.held_at(clocks.wall)
    # what it knew of the folder is forgotten: the first result saved again is written again
    assert store.save("r1", "one") == first
    assert s3.filesystem().exists(first.removeprefix("s3://"))
    assert counting.take() == [("cat_file", "r1"), ("pipe_file", "r1")]
    assert folder.held_until is not None
    assert names(collect(other, 120, now=folder.held_until + 1).removed) == ["chatcli-agent-live"]
    assert stored(s3, bucket, "w") == []


@pytest.mark.parametrize("then", ["closes", "gets a request"])
def test_a_result_written_just_after_a_removal_is_not_left_for_good(
    s3: S3Server, bucket: str, then: str
) -> None:
    """Within CHECK_SECONDS of its last check a process writes without looking; what it
    wrote is found at its next request or when its pipeline closes."""
    clocks = Clocks()
    root = ObjectRoot(
        s3.filesystem(), f"{bucket}/late", retry_after=0, clock=clocks.monotonic, wall=clocks.posix
    )
    store = root.workspace("s", hold=3600)
    store.save("a", "first")
    other = gc_root(s3, bucket, "late")
    assert forget(other, "s")
    clocks.advance(5)
    late = store.save("b", "written after the removal")
    assert other.sessions() == []  # no marker: gc would never see it
    if then == "closes":
        store.close()
    else:
        clocks.advance(CHECK_SECONDS)
        store.hold(3600)
    root.settle(30)
    (folder,) = other.sessions()
    assert folder.files == 1 and folder.held_until is not None
    assert s3.filesystem().exists(late.removeprefix("s3://"))
    assert names(collect(other, 120, now=folder.held_until + 1).removed) == ["chatcli-agent-s"]
    assert stored(s3, bucket, "late") == []


def test_a_pipeline_closed_after_its_folder_was_removed_leaves_nothing(
    s3: S3Server, bucket: str
) -> None:
    clocks = Clocks()
    root = ObjectRoot(
        s3.filesystem(), f"{bucket}/ended", retry_after=0, clock=clocks.monotonic, wall=clocks.posix
    )
    store = root.workspace("s")
    store.save("a", "first")
    assert forget(gc_root(s3, bucket, "ended"), "s")
    store.close()  # it wrote "a" since its last check: it looks, and finds nothing left
    root.settle(30)
    assert stored(s3, bucket, "ended") == []


def test_replicas_with_different_horizons_each_keep_a_hold_and_gc_honours_the_longest(
    s3: S3Server, bucket: str
) -> None:
    url_base = f"{bucket}/two"
    before = time.time()
    long = ObjectRoot(s3.filesystem(), url_base, retry_after=0).workspace("s", hold=7200)
    location = long.save("k", "spilled by the first replica")
    short_root = ObjectRoot(s3.filesystem(), url_base, retry_after=0)
    short = short_root.workspace("s", hold=60)
    assert short.load(location) == "spilled by the first replica"  # it uses the session
    short_root.settle(30)
    holds = [p for p in stored(s3, bucket, "two") if HOLD_PREFIX in p]
    until = sorted(held_until(p.rsplit("/", 1)[1]) or 0 for p in holds)
    assert len(until) == 2
    after = time.time()  # each hold was written between the two, however busy the machine
    for held, hold in zip(until, (60, 7200), strict=True):
        assert before + hold + MARK_SECONDS - 1 <= held <= after + hold + MARK_SECONDS + 1
    (folder,) = gc_root(s3, bucket, "two").sessions()
    assert folder.held_until == until[1]


def test_a_folder_without_holds_is_judged_by_its_age_as_before(s3: S3Server, bucket: str) -> None:
    """What a store of an older version wrote: a marker and results, no hold."""
    fs = s3.filesystem()
    fs.pipe_file(f"{bucket}/old/chatcli-agent-s/{MARKER}", b"shared\n")
    fs.pipe_file(f"{bucket}/old/chatcli-agent-s/tool-results/k-0123456789abcdef.txt", b"x")
    root = gc_root(s3, bucket, "old")
    (folder,) = root.sessions()
    assert folder.held_until is None and not folder.held_at(time.time())
    assert collect(root, 120).removed == []  # written just now
    assert names(collect(root, 120, now=time.time() + 600).removed) == ["chatcli-agent-s"]
    assert stored(s3, bucket, "old") == []


def test_what_is_written_while_gc_removes_a_folder_keeps_its_marker(
    s3: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs = s3.filesystem()
    writer = ObjectRoot(s3.filesystem(), f"{bucket}/race", retry_after=0).workspace("s")
    writer.save("before", "listed by gc")
    remover = fs.rm_file

    def write_then_remove(path: str, *args: Any, **kwargs: Any) -> Any:
        if path.endswith(MARKER):  # the results are gone, the marker is next
            writer.save("during", "written while gc removes the folder")
        return remover(path, *args, **kwargs)

    monkeypatch.setattr(fs, "rm_file", write_then_remove)
    gc = ObjectRoot(fs, f"{bucket}/race", retry_after=0)
    assert forget(gc, "s")
    left = sorted(p.rsplit("/", 1)[1] for p in stored(s3, bucket, "race"))
    assert left[0] == MARKER and left[1].startswith("during-")  # "before" and the hold: gone
    monkeypatch.undo()
    (folder,) = gc_root(s3, bucket, "race").sessions()
    assert folder.files == 1 and folder.held_until is None
    assert names(collect(gc, 120, now=time.time() + 600).removed) == ["chatcli-agent-s"]
    assert stored(s3, bucket, "race") == []


def test_the_gc_command_reports_the_sessions_it_keeps(
    s3: S3Server,
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Any,
) -> None:
    url = f"s3://{bucket}/cli"
    serving = ObjectRoot(s3.filesystem(), f"{bucket}/cli", retry_after=0)
    serving.workspace("live", hold=7200).save("k", OUTPUT)
    (folder,) = serving.sessions()
    monkeypatch.chdir(tmp_path)  # no .env
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    monkeypatch.setenv("CHATCLI_SPILL__URL", url)
    monkeypatch.setenv("CHATCLI_PROXY__SESSION_IDLE_SECONDS", "60")
    ten_minutes_later = time.time() + 600
    monkeypatch.setattr(retention, "time", SimpleNamespace(time=lambda: ten_minutes_later))
    assert main(["gc", "--older-than", "120s", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"kept {url}/chatcli-agent-live: 1 results, last written ")
    assert f"held until {retention.utc(folder.held_until)} by a process serving it" in out
    assert "would remove 0 sessions" in err
    assert "1 as old kept, held by a process serving them" in err
    assert folder.held_until is not None
    after = folder.held_until + 1
    monkeypatch.setattr(retention, "time", SimpleNamespace(time=lambda: after))
    assert main(["gc", "--older-than", "120s"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"removed {url}/chatcli-agent-live: 1 results, ")
    assert "removed 1 sessions" in err and "kept" not in err
