"""A load balancer for the tests: each request goes to the next replica in turn (an HTTP
reverse proxy, as a platform's is, so one client's keep-alive connection still spreads its
requests), answers streamed back as they come; a replica that refuses connections is
skipped, and one can be drained (no new requests, the ones on it finish) before it is
killed, as a rolling deploy does."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

#: Headers of one connection, not of the message: never passed on.
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host", "content-length"}


@dataclass
class Balancer:
    """Replicas' base URLs; :meth:`app` is the balancer itself."""

    replicas: list[str]
    #: Requests in flight on each replica.
    flying: dict[str, int] = field(default_factory=dict)
    #: Replicas given no new request.
    draining: set[str] = field(default_factory=set)
    #: Requests each replica answered.
    served: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._turn = itertools.count()

    def app(self) -> Starlette:
        client = httpx.AsyncClient(timeout=httpx.Timeout(120, connect=2))

        async def forward(request: Request) -> Response:
            body = await request.body()
            headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
            for _ in range(2 * len(self.replicas)):
                replica = self.replicas[next(self._turn) % len(self.replicas)]
                if replica in self.draining:
                    continue
                url = (
                    replica
                    + request.url.path
                    + (f"?{request.url.query}" if request.url.query else "")
                )
                self.flying[replica] = self.flying.get(replica, 0) + 1
                try:
                    sent = client.build_request(request.method, url, headers=headers, content=body)
                    answer = await client.send(sent, stream=True)
                except httpx.ConnectError:
                    self.flying[replica] -= 1
                    continue  # down: the next one
                self.served[replica] = self.served.get(replica, 0) + 1

                async def done(replica: str = replica, answer: httpx.Response = answer) -> None:
                    await answer.aclose()
                    self.flying[replica] -= 1

                passed = [(k, v) for k, v in answer.headers.items() if k.lower() not in _HOP]
                return StreamingResponse(
                    _chunks(answer),
                    answer.status_code,
                    dict(passed),
                    background=BackgroundTask(done),
                )
            return Response("no replica answers", 502)

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            yield
            await client.aclose()

        methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
        return Starlette(
            routes=[Route("/{path:path}", forward, methods=methods)], lifespan=lifespan
        )

    def drain(self, replica: str) -> None:
        """Send ``replica`` nothing new, and wait until what it has in flight is answered
        (called from the test's thread; the balancer runs in its own)."""
        self.draining.add(replica)
        while self.flying.get(replica, 0):
            time.sleep(0.01)


async def _chunks(answer: httpx.Response) -> AsyncIterator[bytes]:
    async for chunk in answer.aiter_raw():
        yield chunk
