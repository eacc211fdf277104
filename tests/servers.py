"""Serve an ASGI app with uvicorn on a free loopback port, in a thread, for a test; and
ports for the servers the tests start in processes of their own."""

from __future__ import annotations

import itertools
import os
import random
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import uvicorn


def _below_the_ephemeral_ports() -> range:
    """20,000 ports just below the range the kernel picks the local port of an outgoing
    connection (and of a ``bind(0)``) from: a port found free there and closed again can be
    taken by any connection before the server meant to listen on it binds it (CI lost a
    proxy's start that way: "address already in use")."""
    try:  # Linux; elsewhere (macOS: 49152-65535) the default below holds too
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    if low < 3024:
        raise RuntimeError(f"the ephemeral ports start at {low}: no room below them")
    return range(max(1024, low - 20_000), low)


#: The ports :func:`free_port` hands out.
PORTS = _below_the_ephemeral_ports()


def port_share(worker: str, workers: int) -> range:
    """The part of :data:`PORTS` pytest-xdist's worker ``worker`` (``gw0``...) of
    ``workers`` hands out, apart from every other worker's; all of it outside xdist."""
    index = worker.removeprefix("gw")
    if not index.isdigit() or int(index) >= workers:
        return PORTS
    width = len(PORTS) // workers
    return PORTS[int(index) * width : (int(index) + 1) * width]


#: This process's :func:`port_share`, and where in it :func:`free_port` looks next (from a
#: random place, so that two runs side by side rarely meet).
_SHARE = port_share(
    os.environ.get("PYTEST_XDIST_WORKER", ""), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
)
_NEXT = itertools.count(random.randrange(len(_SHARE)))


def free_port() -> int:
    """A loopback port nothing listens on now, which no other worker of this run and no
    outgoing connection will take (:data:`PORTS`): for a server started in a process of
    its own, which binds it itself."""
    for _ in range(len(_SHARE)):
        port = _SHARE[next(_NEXT) % len(_SHARE)]
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # something of this machine's own listens there
            return port
    raise RuntimeError(f"no free loopback port in {_SHARE}")


def outside_address() -> str:
    """This machine's address on its default route, which a connection to itself comes
    from: not loopback (or the test is skipped, saying so)."""
    import pytest  # only the tests that need such an address skip

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("198.51.100.1", 9))  # TEST-NET-2: routed, no packet is sent
        except OSError:
            pytest.skip("no network interface beside loopback")
        address: str = probe.getsockname()[0]
    if address.startswith("127.") or address == "0.0.0.0":
        pytest.skip("no network interface beside loopback")
    return address


@contextmanager
def serving(app: Any, host: str = "127.0.0.1") -> Iterator[str]:
    """``app`` listening on ``host`` until the block ends; yields its base URL. The socket
    is bound here and handed to uvicorn, so no other process can take its port first."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    try:
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


#: The SDK clients the running test opened, which the suite closes as it ends
#: (tests/conftest.py).
OPENED: list[Any] = []
Client = TypeVar("Client")


def closed_at_the_end(client: Client) -> Client:
    """``client`` (a synchronous SDK client), closed as the test ends: one left to the
    collector keeps its connection open until then, and warns in the test it ends in."""
    OPENED.append(client)
    return client
