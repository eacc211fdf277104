"""The HTTP transports of a client :func:`middleware.wrap` returned: a model request's
body cleaned before the inner transport sends it, the answer's usage billed as the SDK
reads it (a stream is never held), and the model's recall calls answered here, asking
again. One class per httpx module (``httpx`` or ``httpx2``) and kind (sync, async).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from functools import partial
from types import ModuleType
from typing import Any, ClassVar

from middleware.conversations.cleaning import Cleaned
from middleware.formats import jsonio
from middleware.integrations.cleaner import Cleaner, billed_route, route
from middleware.ledger import UsageReader

logger = logging.getLogger(__name__)

#: Times the model is asked again after its recall calls were answered, at most.
RECALL_ROUNDS = 8


class _Cleaning:
    """A transport that cleans a model request's body before the inner transport sends it,
    bills the answer's usage, and answers the model's recall calls itself (asking again).
    The classes :func:`transport_class` makes put it on the base transport of one httpx
    module (``httpx`` or ``httpx2``), :attr:`http`, and read answers with its streams."""

    #: The httpx module of the requests and responses this transport handles.
    http: ClassVar[ModuleType]
    #: The class of an answer's body read for its usage (a byte stream of :attr:`http`).
    observed: ClassVar[type[Any]]

    def __init__(self, inner: Any, cleaner: Cleaner) -> None:
        self.inner, self.cleaner = inner, cleaner

    def _prepared(self, request: Any, raw: bytes) -> tuple[Any, Any, Cleaned | None]:
        """The request to send (its body cleaned), what it offers the model (the request
        as the agent made it, when the recall tool is offered; else ``None``) and what
        became of it."""
        headers = {k.lower(): v for k, v in request.headers.items()}
        body, offered, cleaned = self.cleaner.prepare(
            request.method, request.url.path, headers, raw
        )
        if body is raw:
            return request, None, cleaned
        if offered is None:
            kept = [
                (k, v) for k, v in request.headers.multi_items() if k.lower() != "content-length"
            ]
            new = self.http.Request(
                request.method, request.url, headers=kept, content=body,
                extensions=request.extensions,
            )  # fmt: skip
            return new, None, cleaned
        return self._rebuilt(request, body), offered, cleaned

    def _rebuilt(self, request: Any, body: bytes) -> Any:
        """``request`` with ``body``, asking for an answer the transport can read."""
        headers = [
            (k, v)
            for k, v in request.headers.multi_items()
            if k.lower() not in ("content-length", "accept-encoding")
        ]
        headers.append(("accept-encoding", "identity"))
        return self.http.Request(
            request.method, request.url, headers=headers, content=body,
            extensions=request.extensions,
        )  # fmt: skip

    def _answered(
        self,
        request: Any,
        response: Any,
        content: bytes,
        sent: dict[str, Any],
        *,
        cleaned: Cleaned | None,
    ) -> tuple[Any, Any, dict[str, Any] | None, Cleaned | None]:
        """The response to hand on, or the next request to send, what it sends and what
        became of it. The answer read is billed first."""
        fmt = billed_route(request.method, request.url.path)
        if fmt is not None and 200 <= response.status_code < 300:
            reader = _reader(fmt, response)
            reader.feed(content)
            self.cleaner.bill(reader, cleaned)
        try:
            answer = jsonio.loads(content)
        except Exception:
            answer = None
        if response.status_code != 200 or not isinstance(answer, dict):
            return _again(self.http, response, content), None, None, None
        follow, final = self.cleaner.answer_recalls(request.url.path, sent, answer)
        if follow is None:
            if final is not answer:
                content = json.dumps(final).encode("utf-8")
            return _again(self.http, response, content), None, None, None
        headers = {k.lower(): v for k, v in request.headers.items()}
        body, agents, again = self.cleaner.prepare(
            request.method, request.url.path, headers, b"", follow
        )
        return None, self._rebuilt(request, body), agents or follow, again

    def _observed(self, request: Any, response: Any, cleaned: Cleaned | None) -> Any:
        """``response`` with its body read for its usage as the SDK reads it, and billed
        once the SDK closes it."""
        fmt = billed_route(request.method, request.url.path)
        if fmt is None or not 200 <= response.status_code < 300:
            return response
        reader = _reader(fmt, response)
        response.stream = self.observed(
            response.stream, reader, lambda: self.cleaner.bill(reader, cleaned)
        )
        return response


class _SyncCleaning(_Cleaning):
    """The cleaning transport of a sync client."""

    def handle_request(self, request: Any) -> Any:
        if route(request.method, request.url.path) is None:
            return self.inner.handle_request(request)
        request, sent, cleaned = self._prepared(request, request.read())
        for _ in range(RECALL_ROUNDS + 1):
            response = self.inner.handle_request(request)
            if sent is None:
                return self._observed(request, response, cleaned)
            content = response.read()
            response.close()
            done, request, sent, cleaned = self._answered(
                request, response, content, sent, cleaned=cleaned
            )
            if done is not None:
                return done
        return _again(self.http, response, content)

    def close(self) -> None:
        self.cleaner.close()  # the inner transport is the original client's


class _AsyncCleaning(_Cleaning):
    """The cleaning transport of an async client: the cleaning runs on a worker thread."""

    async def handle_async_request(self, request: Any) -> Any:
        import anyio.to_thread  # noqa: PLC0415 - httpx's own dependency, async clients only

        if route(request.method, request.url.path) is None:
            return await self.inner.handle_async_request(request)
        raw = await request.aread()
        request, sent, cleaned = await anyio.to_thread.run_sync(self._prepared, request, raw)
        for _ in range(RECALL_ROUNDS + 1):
            response = await self.inner.handle_async_request(request)
            if sent is None:
                return self._observed(request, response, cleaned)
            content = await response.aread()
            await response.aclose()
            done, request, sent, cleaned = await anyio.to_thread.run_sync(
                partial(self._answered, cleaned=cleaned), request, response, content, sent
            )
            if done is not None:
                return done
        return _again(self.http, response, content)

    async def aclose(self) -> None:
        self.cleaner.close()  # the inner transport is the original client's


class _SyncObserved:
    """An answer's body read for its usage as the SDK reads it; ``done`` once closed."""

    def __init__(self, inner: Any, reader: UsageReader, done: Callable[[], object]) -> None:
        self.inner, self.reader, self.done = inner, reader, _Once(done)

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            _feed(self.reader, chunk)
            yield chunk

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.done()


class _AsyncObserved:
    """:class:`_SyncObserved` for an async client."""

    def __init__(self, inner: Any, reader: UsageReader, done: Callable[[], object]) -> None:
        self.inner, self.reader, self.done = inner, reader, _Once(done)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            _feed(self.reader, chunk)
            yield chunk

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            self.done()


_CLASSES: dict[tuple[str, bool], type] = {}


def transport_class(http: ModuleType, is_async: bool) -> type:
    """The cleaning transport of ``http``'s kind: :class:`_SyncCleaning` or
    :class:`_AsyncCleaning` on the module's base transport, reading answers with its byte
    streams (httpx checks both by class; made once per module, since the SDKs may use
    ``httpx`` or ``httpx2``)."""
    key = (http.__name__, is_async)
    made = _CLASSES.get(key)
    if made is None:
        if is_async:
            stream = type("AsyncObserved", (_AsyncObserved, http.AsyncByteStream), {})
            bases: tuple[type, ...] = (_AsyncCleaning, http.AsyncBaseTransport)
        else:
            stream = type("SyncObserved", (_SyncObserved, http.SyncByteStream), {})
            bases = (_SyncCleaning, http.BaseTransport)
        name = "AsyncCleaning" if is_async else "Cleaning"
        made = _CLASSES[key] = type(name, bases, {"http": http, "observed": stream})
    return made


def _reader(fmt: str, response: Any) -> UsageReader:
    """A reader of the usage of ``response`` (a transport's: its body still encoded)."""
    return UsageReader(
        fmt, response.headers.get("content-type", ""), response.headers.get("content-encoding", "")
    )


def _feed(reader: UsageReader, chunk: bytes) -> None:
    try:
        reader.feed(chunk)
    except Exception:  # reading the usage is never the reason an answer breaks off
        logger.exception("could not read an answer's usage")
        reader.readable = False


class _Once:
    """Calls ``action`` the first time it is called (a stream may be closed twice)."""

    def __init__(self, action: Callable[[], object] | None) -> None:
        self.action = action

    def __call__(self) -> None:
        action, self.action = self.action, None
        if action is not None:
            action()


def _again(http: ModuleType, response: Any, content: bytes) -> Any:
    """A response like ``response`` (already read) with ``content`` as its body."""
    dropped = ("content-length", "content-encoding", "transfer-encoding")
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in dropped]
    return http.Response(
        response.status_code,
        headers=headers,
        content=content,
        extensions={k: v for k, v in response.extensions.items() if k != "network_stream"},
    )
