"""``middleware.wrap(client)``: the official ``anthropic``, ``openai`` and ``google-genai``
SDK clients with every model request's history cleaned first.

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

What a wrapped client cleans with (its policy's source, its conversations, its ledger) is
its :class:`~.cleaner.Cleaner`; the transports that call it are in :mod:`.transports`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from middleware.integrations.cleaner import Cleaner, cleaner_for
from middleware.integrations.transports import transport_class
from middleware.policy import Policy

__all__ = ["Cleaner", "cleaner_of", "wrap"]

ClientT = TypeVar("ClientT")


def wrap(
    client: ClientT,
    policy: str | Path | Policy | None = None,
    session_id: str | None = None,
    *,
    recall_tool: bool = False,
    watch: bool = False,
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
    :param watch: ``policy`` is a file to watch: every valid edit is swapped in for the
        requests that start after it (an invalid one keeps the last good policy, said in
        ``cleaner_of(client).source.status``), as the proxy and ``Pipeline`` watch theirs.
    :raises TypeError: ``watch`` without the path of a policy file.
    """
    genai = getattr(client, "_api_client", None)
    if genai is not None and hasattr(genai, "_http_options"):
        copied: ClientT = _genai_copy(client, cleaner_for(policy, session_id, recall_tool, watch))
        return copied
    inner = getattr(client, "_client", None)
    with_options = getattr(client, "with_options", None)
    if inner is None or not callable(with_options):
        raise TypeError(
            f"wrap() takes a client of the official anthropic, openai or google-genai SDK, "
            f"got {type(client).__name__}"
        )
    cleaner = cleaner_for(policy, session_id, recall_tool, watch)
    http = _module_of(inner)
    is_async = isinstance(inner, http.AsyncClient)
    transport = getattr(inner, "_transport", None) or (
        http.AsyncHTTPTransport() if is_async else http.HTTPTransport()
    )
    wrapper = transport_class(http, is_async)(transport, cleaner)
    new_http = type(inner)(
        transport=wrapper, timeout=inner.timeout, follow_redirects=inner.follow_redirects
    )
    wrapped: ClientT = with_options(http_client=new_http)
    wrapped._chatcli_cleaner = cleaner  # type: ignore[attr-defined]
    return wrapped


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
                        "transport": transport_class(http, False)(original, cleaner)},
        "async_client_args": {**(api._http_options.async_client_args or {}),
                              "transport": transport_class(http, True)(
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
