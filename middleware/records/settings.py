"""The ``ledger`` keys that say where records go and how long they stay, and the state
folder the embedded database lives in."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from middleware.policy.settings import section

#: ``ledger.url``'s default: the SQLite file :data:`STATE_FILE` in the state folder.
IN_STATE_FOLDER = "state"
#: The embedded database's file name.
STATE_FILE = "records.sqlite"
#: The folder under ``$XDG_STATE_HOME`` (else ``~/.local/state``) that holds it.
STATE_FOLDER = "chatcli-mw"


@section("ledger")
@dataclass(frozen=True)
class RecordSettings:
    #: The database (``None``: in memory); :attr:`database` resolves the default.
    url: str | None
    held_bytes: int
    keep_days: float | None
    console_bytes: int | None
    replica: str | None

    @property
    def database(self) -> str | None:
        """The SQLAlchemy URL the records go to (``None``: in memory)."""
        if self.url == IN_STATE_FOLDER:
            return f"sqlite:///{state_folder() / STATE_FILE}"
        return self.url

    @property
    def remote(self) -> bool:
        """Whether the database is on a server (an outbox holds records on their way)."""
        return self.database is not None and not self.database.startswith("sqlite")

    def replica_name(self, port: int | None = None) -> str:
        """This process's name in the records: ``ledger.replica``, else the host name
        (and the proxy's port, so replicas on one machine are told apart)."""
        if self.replica is not None:
            return self.replica
        host = socket.gethostname() or "localhost"
        return host if port is None else f"{host}:{port}"


def state_folder() -> Path:
    """``$XDG_STATE_HOME/chatcli-mw``, else ``~/.local/state/chatcli-mw`` (the XDG base
    directory specification's place for what a program keeps between runs)."""
    base = os.environ.get("XDG_STATE_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "state"
    return root / STATE_FOLDER
