"""The leases of a local session folder: each open workspace that uses the folder keeps
one in ``.leases/``, and the last to close removes the folder (a lease of a process of this
host that no longer runs is stale)."""

from __future__ import annotations

import os
import re
import socket
import uuid
from pathlib import Path

#: The folder of the leases, inside a session folder.
LEASES = ".leases"

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def lease_name() -> str:
    """A new lease's name: this host, this process and a random part."""
    return f"{_host()}-{os.getpid()}-{uuid.uuid4().hex}"


def leases_held(session_dir: Path) -> bool:
    """Whether an open workspace uses the folder (leases of processes of this host that no
    longer run are stale and removed)."""
    try:
        leases = list((session_dir / LEASES).iterdir())
    except OSError:
        return False
    alive = False
    for lease in leases:
        host, _, rest = lease.name.rpartition("-")[0].rpartition("-")
        pid = int(rest) if rest.isdigit() else None
        if host == _host() and pid is not None and not _pid_alive(pid):
            lease.unlink(missing_ok=True)
            continue
        alive = True
    return alive


def _host() -> str:
    return _UNSAFE.sub("_", socket.gethostname()) or "host"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, but not ours to signal
    return True
