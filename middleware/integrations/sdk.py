"""``middleware.wrap(client)``: the official ``anthropic`` and ``openai`` SDK clients with
every model request's history cleaned first.

The hook is the client's HTTP transport, not its methods: every way of sending a request
(``create``, the stream helpers, ``count_tokens``, the beta namespaces, ``with_options``
copies, raw responses, the Bedrock, Vertex and Azure clients that share the transport) ends
in one call of the transport, while method names, signatures and helpers change from one
SDK version to the next. The SDK's retries, streaming and errors sit above the transport and
stay as they are; the wrapped client is ``client.with_options(http_client=...)``, a copy
that shares the original's connection pool.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from middleware.conversations.cleaning import Cleaned, clean_body
from middleware.conversations.sessions import SessionPool
from middleware.plugin.host import PluginHost
from middleware.policy import Policy, load_policy

logger = logging.getLogger(__name__)

ClientT = TypeVar("ClientT")

#: Path endings of the requests whose body is cleaned, and their wire format.
ROUTES: tuple[tuple[str, str], ...] = (
    ("/messages/count_tokens", "anthropic"),
    ("/messages", "anthropic"),
    ("/invoke", "anthropic"),  # Bedrock
    ("/invoke-with-response-stream", "anthropic"),
    (":rawPredict", "anthropic"),  # Vertex
    (":streamRawPredict", "anthropic"),
    ("/chat/completions", "openai"),  # OpenAI and Azure
    ("/responses", "responses"),
)


def route(method: str, path: str) -> str | None:
    """The wire format of a request whose body is a model request, else ``None``."""
    if method != "POST":
        return None
    return next((fmt for ending, fmt in ROUTES if path.endswith(ending)), None)


@dataclass
class Cleaner:
    """What a wrapped client cleans with: one policy, one pipeline per conversation."""

    policy: Policy
    session_id: str | None = None
    host: PluginHost = field(default_factory=PluginHost.create)

    def __post_init__(self) -> None:
        self.pool = SessionPool(self.host, idle_seconds=3600)
        #: What became of the last request the client sent (its report, if processed).
        self.last: Cleaned | None = None

    def clean(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> bytes:
        fmt = route(method, path)
        if fmt is None:
            return raw
        cleaned = clean_body(
            raw, fmt, headers, self.pool, ("wrapped", self.policy), session=self.session_id
        )
        self.last = cleaned
        if cleaned.error is not None:
            logger.error("sent a %s request unchanged: %s", fmt, cleaned.error)
        return cleaned.body

    def close(self) -> None:
        self.pool.close()


def wrap(
    client: ClientT,
    policy: str | Path | Policy | None = None,
    session_id: str | None = None,
) -> ClientT:
    """A copy of ``client`` (``anthropic.Anthropic``, ``AsyncAnthropic``, ``openai.OpenAI``,
    ``AsyncOpenAI`` or a variant) whose Messages, Chat Completions and Responses requests
    have their history cleaned before they leave.

    :param policy: a policy file, ``preset:NAME``, a loaded :class:`Policy`, or ``None``
        for ``$CHATCLI_POLICY`` else the embedded default.
    :param session_id: the conversation's spill workspace; ``None``: found from each request
        (Claude Code's session, else a digest of the conversation's opening), so one client
        can serve several conversations.
    """
    inner = getattr(client, "_client", None)
    with_options = getattr(client, "with_options", None)
    if inner is None or not callable(with_options):
        raise TypeError(
            f"wrap() takes a client of the official anthropic or openai SDK, got "
            f"{type(client).__name__}"
        )
    loaded = policy if isinstance(policy, Policy) else load_policy(policy)
    cleaner = Cleaner(loaded, session_id)
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


_CLASSES: dict[tuple[str, bool], type] = {}


def _transport_class(http: ModuleType, is_async: bool) -> type:
    """A transport of ``http``'s kind that cleans model requests before the inner one sends
    them (made once per httpx module: the SDKs may use ``httpx`` or ``httpx2``)."""
    key = (http.__name__, is_async)
    if key in _CLASSES:
        return _CLASSES[key]

    def rebuilt(request: Any, cleaner: Cleaner, raw: bytes) -> Any:
        headers = {k.lower(): v for k, v in request.headers.items()}
        body = cleaner.clean(request.method, request.url.path, headers, raw)
        if body is raw:
            return request
        new_headers = [
            (k, v) for k, v in request.headers.multi_items() if k.lower() != "content-length"
        ]
        return http.Request(
            request.method, request.url, headers=new_headers, content=body,
            extensions=request.extensions,
        )  # fmt: skip

    if is_async:
        import anyio.to_thread  # noqa: PLC0415 - httpx's own dependency, async clients only

        class AsyncCleaning(http.AsyncBaseTransport):  # type: ignore[name-defined,misc]
            def __init__(self, inner: Any, cleaner: Cleaner) -> None:
                self.inner, self.cleaner = inner, cleaner

            async def handle_async_request(self, request: Any) -> Any:
                if route(request.method, request.url.path) is not None:
                    raw = await request.aread()
                    request = await anyio.to_thread.run_sync(rebuilt, request, self.cleaner, raw)
                return await self.inner.handle_async_request(request)

            async def aclose(self) -> None:
                self.cleaner.close()  # the inner transport is the original client's

        _CLASSES[key] = AsyncCleaning
    else:

        class Cleaning(http.BaseTransport):  # type: ignore[name-defined,misc]
            def __init__(self, inner: Any, cleaner: Cleaner) -> None:
                self.inner, self.cleaner = inner, cleaner

            def handle_request(self, request: Any) -> Any:
                if route(request.method, request.url.path) is not None:
                    request = rebuilt(request, self.cleaner, request.read())
                return self.inner.handle_request(request)

            def close(self) -> None:
                self.cleaner.close()  # the inner transport is the original client's

        _CLASSES[key] = Cleaning
    return _CLASSES[key]
