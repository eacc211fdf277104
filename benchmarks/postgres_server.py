"""A PostgreSQL server for a benchmark, started in a temporary folder and stopped at the end
(tests/database.py does the same for the tests, with pytest around it).

Debian's server (package ``postgresql``, in ``/usr/lib/postgresql/VERSION/bin``) listens on
a loopback port of its own. PostgreSQL refuses to run as root, so as root it runs as the
``postgres`` user the package creates. Its settings are the server's defaults (fsync and
synchronous commits on, 128 MB of shared buffers), as a fleet's database would have them,
but for ``max_connections``; :data:`SETTINGS` says them.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

#: The user the server runs as when the benchmark runs as root.
SERVER_USER = "postgres"
#: The role the benchmark connects as (trusted on loopback).
ROLE = "bench"
#: Settings given to the server beyond its defaults.
SETTINGS = ("max_connections=200",)


class NoServer(RuntimeError):
    """No PostgreSQL server can be started on this machine (the message says why)."""


def binaries() -> Path:
    """The folder of the newest PostgreSQL installed from Debian's packages."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found:
        raise NoServer("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    return Path(found[-1]).parent


def _run(*command: str | Path) -> None:
    words = [str(word) for word in command]
    if os.geteuid() == 0:
        words = ["runuser", "-u", SERVER_USER, "--", *words]
    subprocess.run(words, check=True, timeout=120, capture_output=True)


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@dataclass(frozen=True)
class Server:
    """A running server: the URL of its database, and its main process (the postmaster,
    whose children are the connections' processes)."""

    url: str
    pid: int


@contextmanager
def postgres(database: str = "bench") -> Iterator[Server]:
    """A new server with an empty ``database`` until the block ends
    (``postgresql://bench@127.0.0.1:PORT/bench``)."""
    bin_folder = binaries()
    # In /tmp, not a folder of root's: the server's user must reach it.
    folder = Path(tempfile.mkdtemp(prefix="chatcli-bench-pg-", dir="/tmp"))
    data = folder / "data"
    try:
        if os.geteuid() == 0:
            shutil.chown(folder, SERVER_USER)
        _run(bin_folder / "initdb", "-D", data, "-A", "trust", "-U", ROLE, "-E", "UTF8",
             "--no-instructions")  # fmt: skip
        port = _port()
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 " + " ".join(
            f"-c {setting}" for setting in SETTINGS
        )
        _run(bin_folder / "pg_ctl", "-D", data, "-o", options, "-l", folder / "log", "-w",
             "start")  # fmt: skip
        try:
            _run(bin_folder / "createdb", "-h", "127.0.0.1", "-p", str(port), "-U", ROLE,
                 database)  # fmt: skip
            pid = int((data / "postmaster.pid").read_text().split()[0])
            yield Server(f"postgresql://{ROLE}@127.0.0.1:{port}/{database}", pid)
        finally:
            _run(bin_folder / "pg_ctl", "-D", data, "-m", "fast", "-w", "stop")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
