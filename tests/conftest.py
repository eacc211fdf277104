"""Fixtures every test folder may use: an S3-compatible server on loopback, started once
for the run by the first test that asks for it, and an empty bucket in it; a PostgreSQL
server likewise, and an empty database in it; the texts
microcompaction reads for their summaries.

Every test also gets a temporary folder of its own as the system's (``TMPDIR`` and
:data:`tempfile.tempdir`), so a default spill folder, a store a test opens without naming
its root, the records database of the state folder (``XDG_STATE_HOME``), or a program it
starts never meets another test's files: the suite runs on all
cores (pytest-xdist), and two tests that use the same session id on the shared default
folder would otherwise collide."""

from __future__ import annotations

import gc
import tempfile
from collections.abc import Iterator

import parallel
import pytest
import servers
from database import PostgresServer, postgres_server
from hypothesis import settings
from object_store import S3Server, s3_server

# Hypothesis times each example against a deadline (200 ms) by default: a timed test, which a
# loaded machine fails (an example of 65 ms took 272 ms once with five other processes
# busy). Speed is measured in benchmarks/, never in a test.
settings.register_profile("chatcli", deadline=None)
settings.load_profile("chatcli")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    return parallel.auto_workers()


@pytest.fixture(autouse=True)
def timing_has_a_core(request: pytest.FixtureRequest) -> None:
    """A test that times a real wait runs with the other workers yielding it the CPU."""
    groups = (
        mark.args[0] if mark.args else mark.kwargs.get("name")
        for mark in request.node.iter_markers("xdist_group")
    )
    if parallel.TIMING in groups:
        parallel.give_way_to_timing()


def pytest_collection_finish(session: pytest.Session) -> None:
    """The modules the tests imported (the SDKs, LiteLLM, LangChain: over half a million
    objects) are set aside from the garbage collector's passes, which would otherwise go
    through them all again at each full collection for the rest of the run."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def collected_as_it_ends() -> Iterator[None]:
    """What a test left unreachable is collected as it ends: a socket it leaked warns in its
    own teardown (an error), not in whichever later test the collector happens to run in.
    What survives is then set aside (frozen), so that each test's collection goes only
    through what the test made: a library a test imports would otherwise be gone through
    again at the end of every later one."""
    yield
    while servers.OPENED:
        servers.OPENED.pop().close()
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def own_temporary_folder(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path_factory.mktemp("tmp", numbered=True)
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    # The records database by default (ledger.url: state) and a replica's outbox: a
    # test's own, as a user's is theirs.
    monkeypatch.setenv("XDG_STATE_HOME", str(folder / "state"))


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    with s3_server() as server:
        yield server


@pytest.fixture
def bucket(s3: S3Server) -> str:
    return s3.bucket()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> str:
    """A new empty database on the worker's PostgreSQL server."""
    return postgres.database()


@pytest.fixture
def summaries_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts microcompaction reads the mentions of (for a summary or its size), in
    order, as the test runs."""
    from middleware.steps.microcompact import readings

    read: list[str] = []
    real = readings.mentions

    def recording(text: str, limit: int) -> list[str]:
        read.append(text)
        return real(text, limit)

    monkeypatch.setattr(readings, "mentions", recording)
    return read
