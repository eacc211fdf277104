"""How the proxy shares its open-file limit between client connections and the rest.

Every client connection is an open file, and so is every upstream connection, spill file,
log and the ledger. ``chatcli-mw serve`` raises its soft limit to the hard one, keeps
files for what is not a client connection (the upstream connections, at most
``proxy.max_connections``, and a share of the limit for the rest) and accepts client
connections in what is left, so ``accept()`` never fails for want of files. The share
kept scales with the limit: a fixed 256 once left a process limited to 256 files room
for one connection, and every request, ``/healthz`` included, got a 503.

``proxy.client_connections`` requests are served at once; one more gets a 503 at once,
but ``/healthz`` and ``/metrics`` are answered (:data:`STATUS_CONNECTIONS` are kept for
them), so an orchestrator does not restart a proxy for being busy. Past as many
connections again, the proxy stops accepting: connections wait in the listen backlog,
each making room by closing the one that has waited longest for a request head
(:mod:`.door`), and memory stays bounded by the cap, whatever comes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

logger = logging.getLogger(__name__)

#: Files kept at most for the store, the logs and the ledger (beside the upstream
#: connections): an eighth of a limit under 2,048.
SPARE_FILES = 256
#: Files kept at least for them.
SPARE_FILES_LEAST = 16
#: Connections accepted past ``proxy.client_connections`` for ``/healthz`` and
#: ``/metrics`` at least, when the limit is what bounds the connections.
STATUS_CONNECTIONS = 8


@dataclass(frozen=True)
class OpenFiles:
    """How many files go to what, under the limit."""

    #: The open-file limit (soft, once raised), None where there is none (Windows).
    limit: int | None
    #: Files kept for what is not a client connection.
    kept: int
    #: Client connections open at once at most: past it the proxy stops accepting.
    accepted: int
    #: Requests served at once: past it, a request gets a 503 but on ``/healthz`` and
    #: ``/metrics``.
    served: int


def open_files(wanted: int, upstream: int, limit: int | None) -> OpenFiles:
    """The shares of ``limit`` files, for ``wanted`` client connections
    (``proxy.client_connections``) and ``upstream`` ones (``proxy.max_connections``)."""
    most = 2 * wanted + STATUS_CONNECTIONS  # served, and as many again turned away at once
    if limit is None:
        return OpenFiles(None, 0, most, wanted)
    kept = upstream + min(SPARE_FILES, max(limit // 8, SPARE_FILES_LEAST))
    room = max(limit - kept, 2)
    served = min(wanted, max(room - STATUS_CONNECTIONS, room // 2))
    return OpenFiles(limit, kept, min(room, 2 * served + STATUS_CONNECTIONS), served)


def raised_limit(wanted: int) -> int | None:
    """The process's open-file limit, its soft limit raised first to the hard one (the
    usual soft limit is 1,024), or to ``wanted`` where the hard one is unlimited."""
    try:
        import resource  # noqa: PLC0415 - POSIX only
    except ImportError:  # Windows: no such limit
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            logger.warning("cannot raise the open-file limit from %d: %s", soft, exc)
    return None if soft == resource.RLIM_INFINITY else soft


def share_open_files(client_connections: int, max_connections: int) -> OpenFiles:
    """:func:`open_files` under this process's limit (raised), saying when the limit
    holds fewer client connections than ``proxy.client_connections``."""
    wanted = open_files(client_connections, max_connections, None)
    limit = raised_limit(wanted.accepted + max_connections + SPARE_FILES)
    files = open_files(client_connections, max_connections, limit)
    if files.served < client_connections:
        logger.warning(
            "proxy.client_connections is %d, but the open-file limit (%s) less the %d files "
            "kept for upstream connections (proxy.max_connections: %d) and the spill store "
            "leaves room for %d: serving %d at once; raise the hard limit (ulimit -Hn, "
            "LimitNOFILE=) to serve more", client_connections, limit, files.kept,
            max_connections, files.accepted, files.served,
        )  # fmt: skip
    return files
