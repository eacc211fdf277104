"""An S3-compatible server on loopback for the tests (moto's standalone server, a real
HTTP endpoint that s3fs talks to as it would to S3), and the policy that spills to it."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

#: Credentials moto accepts; nothing here reaches AWS.
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "chatcli-test",
    "AWS_SECRET_ACCESS_KEY": "chatcli-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass
class S3Server:
    endpoint: str
    server: Any
    buckets: list[str] = field(default_factory=list)

    @property
    def storage_options(self) -> dict[str, Any]:
        return {"client_kwargs": {"endpoint_url": self.endpoint}}

    def filesystem(self) -> Any:
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options)

    def bucket(self, *, versioned: bool = True) -> str:
        """A new empty bucket (versioned: every write of an object is counted)."""
        name = f"spill-{uuid.uuid4().hex[:12]}"
        fs = self.filesystem()
        fs.mkdir(name)
        if versioned:
            fs.make_bucket_versioned(name)
        self.buckets.append(name)
        return name

    def policy(self, url: str, **overrides: Any) -> dict[str, Any]:
        """Dotted overrides that spill to ``url`` on this server."""
        return {"spill.url": url, "spill.storage_options": self.storage_options, **overrides}

    def versions(self, url: str) -> dict[str, int]:
        """Every object under ``url`` and how many times it was written."""
        fs = self.filesystem()
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        counts: dict[str, int] = {}
        pages = fs.call_s3("list_object_versions", Bucket=bucket, Prefix=prefix)
        for version in pages.get("Versions", []):
            counts[version["Key"]] = counts.get(version["Key"], 0) + 1
        return counts

    def stop(self) -> None:
        self.server.stop()


def set_credentials() -> None:
    for name, value in CREDENTIALS.items():
        os.environ.setdefault(name, value)


@contextmanager
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server on a free loopback port until the block ends."""
    from moto.server import ThreadedMotoServer

    set_credentials()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request
    # Port 0: the server binds a free port itself (a port found free and then bound by
    # the server can be taken in between, and moto's start waits forever if it is).
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    running = S3Server(f"http://127.0.0.1:{port}", server)
    try:
        yield running
    finally:
        server.stop()


@contextmanager
def hanging_server() -> Iterator[str]:
    """A server on loopback that accepts every connection and never answers (a store
    behind a dead load balancer); yields its endpoint."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(512)
    listener.settimeout(0.05)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in held:
            connection.close()
        listener.close()
