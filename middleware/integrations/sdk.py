"""``middleware.wrap(client)``: the official ``anthropic`` and ``openai`` SDK clients with
every model request's history cleaned first.

The hook is the client's HTTP transport, not its methods: every way of sending a request
(``create``, the stream helpers, ``count_tokens``, the beta namespaces, ``with_options``
copies, raw responses, the Bedrock, Vertex and Azure clients that share the transport) ends
in one call of the transport, while method names, signatures and helpers change from one
SDK version to the next. The SDK's retries, streaming and errors sit above the transport and
stay as they are; the wrapped client is ``client.with_options(http_client=...)``, a copy
that shares the original's connection pool.

The ``usage`` of every answer goes to the client's ledger (:mod:`middleware.ledger`):
``cleaner_of(client).ledger`` says what each session was billed and would have cost
unprocessed; a streamed answer is read as the SDK reads it, never held.

With ``recall_tool=True``, a request that is not streamed and declares tools is offered a
``recall`` tool (:mod:`.recall`) and its previews say to use it; the transport answers the
model's recall calls itself and asks again, so the agent's loop gets the model's final
answer and never a call to a tool it does not know.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, TypeVar

from middleware.conversations.cleaning import Cleaned
from middleware.conversations.front import Conversations
from middleware.conversations.sessions import SessionPool
from middleware.formats import jsonio
from middleware.formats.routes import client_route
from middleware.integrations import recall
from middleware.ledger import Ledger, UsageReader
from middleware.ledger.sums import Entry
from middleware.plugin.host import PluginHost
from middleware.policy import Policy, load_policy
from middleware.policy.settings import bind
from middleware.spill import SpillSettings

logger = logging.getLogger(__name__)

ClientT = TypeVar("ClientT")


def route(method: str, path: str) -> str | None:
    """The wire format of a request whose body is a model request, else ``None``."""
    routed = client_route(method, path)
    return routed.codec.name if routed is not None else None


def billed_route(method: str, path: str) -> str | None:
    """The wire format of a request whose answer is billed as a model call (a token
    count is not), else ``None``."""
    routed = client_route(method, path)
    return routed.codec.name if routed is not None and routed.billed else None


#: Times the model is asked again after its recall calls were answered, at most.
RECALL_ROUNDS = 8


@dataclass
class Cleaner:
    """What a wrapped client cleans with: one policy, one pipeline per conversation, and
    (with ``tool_policy``) the recall tool."""

    policy: Policy
    session_id: str | None = None
    host: PluginHost = field(default_factory=PluginHost.create)
    #: The policy of requests offered the recall tool (its previews name the tool).
    tool_policy: Policy | None = None

    def __post_init__(self) -> None:
        #: What is kept of each conversation between its requests, and the ledger.
        self.conversations = Conversations.open(self.host, self.policy)
        #: What became of the last request the client sent (its report, if processed).
        self.last: Cleaned | None = None

    @property
    def pool(self) -> SessionPool:
        """One conversation's state per session, under the policy's byte budget."""
        return self.conversations.pool

    @property
    def ledger(self) -> Ledger:
        """What the answers' usage says was billed, per session and in total."""
        return self.conversations.ledger

    def bill(self, reader: UsageReader, cleaned: Cleaned | None) -> Entry | None:
        """Put one answer, read by ``reader``, in the ledger (``cleaned``: what became of
        its request; ``None``: it went as it came)."""
        return self.conversations.answer(reader, cleaned, self.policy)

    def prepare(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        raw: bytes,
        parsed: dict[str, Any] | None = None,
    ) -> tuple[bytes, dict[str, Any] | None, Cleaned | None]:
        """The body to send; if it offers the recall tool, the request as the agent made
        it (what a follow-up extends: offered the tool and cleaned again, it reads as
        every other request of the conversation); and what became of it (``None``: not a
        model request). ``parsed``: ``raw`` already read."""
        routed = client_route(method, path)
        if routed is None:
            return raw, None, None
        fmt = routed.codec.name
        if not routed.cleaned:  # only billed: as it came
            cleaned = self.conversations.request(
                raw, routed.codec, headers, ("wrapped", self.policy), session=self.session_id,
                cleaned=False,
            )  # fmt: skip
            self.last = cleaned
            return raw, None, cleaned
        agents = parsed if parsed is not None else self._parsed(path, raw)
        with_tool = recall.offered(fmt, agents) if agents is not None else None
        policy = ("recall", self.tool_policy) if with_tool and self.tool_policy else (
            "wrapped", self.policy)  # fmt: skip
        sent = with_tool if with_tool is not None else parsed
        cleaned = self.conversations.request(
            raw if sent is None else json.dumps(sent).encode("utf-8"),
            routed.codec, headers, policy, session=self.session_id,
        )  # fmt: skip
        self.last = cleaned
        if cleaned.error is not None:
            logger.error("sent this %s request unchanged: %s", fmt, cleaned.error)
        return cleaned.body, agents if with_tool is not None else None, cleaned

    def _parsed(self, path: str, raw: bytes) -> dict[str, Any] | None:
        """The request body, if it may be offered the recall tool."""
        routed = client_route("POST", path)
        if self.tool_policy is None or routed is None or not routed.billed or routed.streamed:
            return None  # a token count, or an answer streamed by its path
        try:
            body = jsonio.loads(raw)
        except Exception:  # not JSON: cleaning leaves it as it is
            return None
        return body if isinstance(body, dict) else None

    def answer_recalls(
        self, path: str, sent: dict[str, Any], answer: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """What to do with the model's ``answer`` to the request ``sent``: ``(None,
        answer)`` to hand it to the agent (its recall calls taken out when it also calls
        the agent's own tools), or the follow-up request to send instead."""
        fmt = route("POST", path) or "anthropic"
        found, total = recall.calls(fmt, answer)
        if not found:
            return None, answer
        settings = bind(self.tool_policy or self.policy, SpillSettings)
        if len(found) < total:  # the agent's own tools too: it gets those
            logger.info(
                "the model called recall beside other tools; its recall calls are "
                "dropped from the answer"
            )
            return None, recall.without_calls(fmt, answer)
        results = [(call_id, recall.read(settings, arguments)) for call_id, arguments in found]
        return recall.follow_up(fmt, sent, answer, results), answer

    def close(self) -> None:
        self.conversations.close()


def wrap(
    client: ClientT,
    policy: str | Path | Policy | None = None,
    session_id: str | None = None,
    *,
    recall_tool: bool = False,
) -> ClientT:
    """A copy of ``client`` (``anthropic.Anthropic``, ``AsyncAnthropic``, ``openai.OpenAI``,
    ``AsyncOpenAI`` or a variant, ``google.genai.Client``) whose Messages, Chat
    Completions, Responses and Gemini ``generateContent`` requests have their history
    cleaned before they leave.

    :param policy: a policy file, ``preset:NAME``, a loaded :class:`Policy`, or ``None``
        for ``$CHATCLI_POLICY`` else the embedded default.
    :param session_id: the conversation's spill workspace; ``None``: found from each request
        (Claude Code's session, else a digest of the conversation's opening), so one client
        can serve several conversations.
    :param recall_tool: offer the model a ``recall`` tool on requests that are not streamed
        and declare tools, have their previews name it, and answer its calls in the
        transport (see the module docstring).
    """
    genai = getattr(client, "_api_client", None)
    if genai is not None and hasattr(genai, "_http_options"):
        copied: ClientT = _genai_copy(client, _cleaner(policy, session_id, recall_tool))
        return copied
    inner = getattr(client, "_client", None)
    with_options = getattr(client, "with_options", None)
    if inner is None or not callable(with_options):
        raise TypeError(
            f"wrap() takes a client of the official anthropic, openai or google-genai SDK, "
            f"got {type(client).__name__}"
        )
    cleaner = _cleaner(policy, session_id, recall_tool)
    http = _module_of(inner)
    is_async = isinstance(inner, http.AsyncClient)
    transport = getattr(inner, "_transport", None) or (
        http.AsyncHTTPTransport() if is_async else http.HTTPTransport()
    )
    wrapper = _transport_class(http, is_async)(transport, cleaner)
    new_http = type(inner)(
        transport=wrapper, timeout=inner.timeout, follow_redirects=inner.follow_redirects
    )
    wrapped: ClientT = with_options(http_client=new_http)
    wrapped._chatcli_cleaner = cleaner  # type: ignore[attr-defined]
    return wrapped


def _cleaner(
    policy: str | Path | Policy | None, session_id: str | None, recall_tool: bool
) -> Cleaner:
    loaded = policy if isinstance(policy, Policy) else load_policy(policy)
    tool_policy = recall.tool_policy(policy) if recall_tool else None
    return Cleaner(loaded, session_id, tool_policy=tool_policy)


def _genai_copy(client: Any, cleaner: Cleaner) -> Any:
    """A ``google.genai`` client like ``client`` whose HTTP clients send through cleaning
    transports: the SDK makes (and closes) them around the transports it is given, and a
    transport for the async client keeps ``client.aio`` off aiohttp, past any transport.
    The sync transport sends through the original client's connection pool."""
    api = client._api_client
    http = _module_of(api._httpx_client)
    original = getattr(api._httpx_client, "_transport", None) or http.HTTPTransport()
    options = api._http_options.model_copy(update={
        "client_args": {**(api._http_options.client_args or {}),
                        "transport": _transport_class(http, False)(original, cleaner)},
        "async_client_args": {**(api._http_options.async_client_args or {}),
                              "transport": _transport_class(http, True)(
                                  http.AsyncHTTPTransport(), cleaner)},
    })  # fmt: skip
    wrapped = type(client)(
        vertexai=api.vertexai, api_key=api.api_key, credentials=api._credentials,
        project=api.project, location=api.location, http_options=options,
    )  # fmt: skip
    wrapped._chatcli_cleaner = cleaner
    return wrapped


def cleaner_of(client: Any) -> Cleaner:
    """The :class:`Cleaner` of a client :func:`wrap` returned (its last report, its pool)."""
    cleaner: Cleaner = client._chatcli_cleaner
    return cleaner


def _module_of(inner: Any) -> ModuleType:
    """The ``httpx`` (or ``httpx2``) module the SDK's HTTP client comes from."""
    for cls in type(inner).__mro__:
        root = cls.__module__.split(".")[0]
        if cls.__name__ in ("Client", "AsyncClient") and root in sys.modules:
            return sys.modules[root]
    raise TypeError(f"cannot tell which httpx the client's {type(inner).__name__} is from")


class _Cleaning:
    """A transport that cleans a model request's body before the inner transport sends it,
    bills the answer's usage, and answers the model's recall calls itself (asking again).
    The classes :func:`_transport_class` makes put it on the base transport of one httpx
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


def _transport_class(http: ModuleType, is_async: bool) -> type:
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
