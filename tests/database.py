"""A PostgreSQL server for the tests: Debian's (package ``postgresql``), started in a folder
of its own on a loopback port, once per worker by the first test that asks for it, with a
new empty database for each test.

PostgreSQL refuses to run as root; CI runs as root, so the server runs as the ``postgres``
user the package creates (``runuser``). Without the package a test skips, saying how to get
it, unless ``CHATCLI_REQUIRE_POSTGRES`` is set (``.ci/run`` sets it): then it fails.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import servers

#: The user the server runs as, when the tests run as root.
SERVER_USER = "postgres"
#: The role the tests connect as (a superuser: it makes databases; trusted on loopback).
ROLE = "chatcli"


@dataclass
class PostgresServer:
    """A running server: its folder, port, and the databases made in it."""

    folder: Path
    port: int
    bin: Path
    databases: list[str] = field(default_factory=list)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{ROLE}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new empty database's URL."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        self.psql("postgres", f"CREATE DATABASE {name}")
        self.databases.append(name)
        return self.url(name)

    def psql(self, database: str, command: str) -> str:
        done = subprocess.run(
            [str(self.bin / "psql"), "-X", "-q", "-t", "-A", "-h", "127.0.0.1", "-p",
             str(self.port), "-U", ROLE, "-d", database, "-c", command],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        return done.stdout

    def pg_ctl(self, *args: str) -> None:
        _as_server_user([str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), *args])

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self.pg_ctl("-o", options, "-l", str(self.folder / "log"), "-w", "-t", "60", "start")

    def stop(self) -> None:
        self.pg_ctl("-m", "fast", "-w", "stop")

    @property
    def running(self) -> bool:
        return (self.folder / "data" / "postmaster.pid").exists()

    def pause(self) -> None:
        """Stop the server's processes where they are (SIGSTOP): a database that hangs."""
        _as_server_user([str(self.bin / "pg_ctl"), "kill", "STOP", str(self.postmaster_pid)])

    @property
    def postmaster_pid(self) -> int:
        return int((self.folder / "data" / "postmaster.pid").read_text().split()[0])


def _server_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _as_server_user(command: list[str]) -> None:
    if os.geteuid() == 0:
        command = ["runuser", "-u", SERVER_USER, "--", *command]
    subprocess.run(command, check=True, timeout=120, capture_output=True)


def missing() -> str | None:
    """Why no server can start here, or ``None``."""
    if _server_bin() is None:
        return "PostgreSQL is not installed (Debian: apt-get install postgresql; .ci/run does)"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root, and there is no {SERVER_USER!r} user to run PostgreSQL as"
    return None


def skip_without_server() -> None:
    reason = missing()
    if reason is None:
        return
    if os.environ.get("CHATCLI_REQUIRE_POSTGRES"):
        pytest.fail(f"CHATCLI_REQUIRE_POSTGRES is set, but {reason}")
    pytest.skip(reason)


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """A new server in a temporary folder until the block ends."""
    skip_without_server()
    binaries = _server_bin()
    assert binaries is not None
    # Not under the tests' own temporary folders: the server's user must reach it.
    folder = Path(tempfile.mkdtemp(prefix="chatcli-pg-", dir="/tmp"))
    try:
        if os.geteuid() == 0:
            shutil.chown(folder, SERVER_USER)
        _as_server_user([str(binaries / "initdb"), "-D", str(folder / "data"), "-A", "trust",
                         "-U", ROLE, "-E", "UTF8", "--no-sync", "--no-instructions"])  # fmt: skip
        server = PostgresServer(folder, servers.free_port(), binaries)
        server.start()
        try:
            yield server
        finally:
            if server.running:
                with contextlib.suppress(OSError, ValueError):
                    os.kill(server.postmaster_pid, signal.SIGCONT)  # a paused one stops too
                server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
