"""Serve an ASGI app with uvicorn on a free loopback port, in a thread, for a test."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import uvicorn


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` listening on loopback until the block ends; yields its base URL."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


#: The SDK clients the running test opened, which the suite closes as it ends
#: (tests/conftest.py).
OPENED: list[Any] = []
Client = TypeVar("Client")


def closed_at_the_end(client: Client) -> Client:
    """``client`` (a synchronous SDK client), closed as the test ends: one left to the
    collector keeps its connection open until then, and warns in the test it ends in."""
    OPENED.append(client)
    return client
