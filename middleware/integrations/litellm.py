"""LiteLLM: a callback that cleans each request's history before it goes to the model.

In the LiteLLM proxy's ``config.yaml``::

    litellm_settings:
      callbacks: middleware.integrations.litellm.proxy_handler_instance

In Python, ``litellm.callbacks = [ChatcliCallback()]`` cleans ``litellm.acompletion`` and
``litellm.aresponses`` calls (LiteLLM lets a callback change an asynchronous request only),
and :func:`completion` is ``litellm.completion`` with the history cleaned first.

Each request is cleaned by its conversation as the proxy and :func:`middleware.wrap` clean
one (:class:`~middleware.conversations.front.Conversations`), at the time it is sent: a
request after the prompt cache went cold may be rewritten for free. A request the pipeline
cannot process goes as it was, and the failure is logged: the callback is never the reason
a request fails.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from middleware.errors import MissingExtraError

try:
    import litellm
    from litellm.integrations.custom_logger import CustomLogger
except ImportError as exc:  # pragma: no cover - exercised by the extras test
    raise MissingExtraError("litellm", "litellm>=1.50", "middleware.integrations.litellm") from exc

import anyio.to_thread

from middleware.conversations.front import Conversations
from middleware.conversations.sessions import SessionPool
from middleware.formats import get_codec
from middleware.plugin.host import PluginHost
from middleware.policy import Policy, load_policy
from middleware.report import Report

#: The public names (tests/test_public_surface.py pins them); ``proxy_handler_instance`` is
#: made on first use (:func:`__getattr__`).
__all__ = ["ChatcliCallback", "completion", "proxy_handler_instance"]  # noqa: F822 - __getattr__

logger = logging.getLogger(__name__)

#: LiteLLM call types whose request carries a Responses ``input``.
RESPONSES_CALLS = frozenset({"responses", "aresponses"})
#: The key of the callback's policy in its pool.
KEY = "litellm"


class ChatcliCallback(CustomLogger):
    """Cleans the ``messages`` (or Responses ``input``) of every request LiteLLM sends.

    :param policy: a policy file, ``preset:NAME``, a loaded :class:`Policy`, or ``None``
        for ``$CHATCLI_POLICY`` else the embedded default.
    """

    def __init__(self, policy: str | Path | Policy | None = None) -> None:
        super().__init__()
        self.policy = policy if isinstance(policy, Policy) else load_policy(policy)
        #: The conversations' state, and the ledger whose clock says when a request is sent.
        self.conversations = Conversations.open(PluginHost.create(), self.policy)
        #: The report of the last request cleaned.
        self.last_report: Report | None = None

    @property
    def pool(self) -> SessionPool:
        """One conversation's state per session, under the policy's byte budget."""
        return self.conversations.pool

    def clean(self, data: Mapping[str, Any], call_type: str = "completion") -> dict[str, Any]:
        """``data`` (a request's keyword arguments) with its history cleaned; a new dict.
        Its session is ``litellm_session_id``, else found from the history's opening."""
        key, fmt = (
            ("input", "responses") if str(call_type) in RESPONSES_CALLS else ("messages", "openai")
        )
        history = data.get(key)
        if not isinstance(history, list):
            return dict(data)
        session = data.get("litellm_session_id")
        cleaned = self.conversations.history(
            history, get_codec(fmt), (KEY, self.policy), session=str(session) if session else None
        )
        if cleaned.messages is None:  # not processed: why is logged
            return dict(data)
        self.last_report = cleaned.report
        return {**data, key: cleaned.messages}

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any]:
        """The LiteLLM proxy's hook: the request before it is routed."""
        return await anyio.to_thread.run_sync(self.clean, data, _call_name(call_type))

    async def async_pre_call_deployment_hook(
        self, kwargs: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        """The library's hook (``litellm.acompletion`` and the router): the request just
        before it is sent. The proxy's requests were cleaned by :meth:`async_pre_call_hook`."""
        if kwargs.get("proxy_server_request") is not None:
            return None
        return await anyio.to_thread.run_sync(self.clean, kwargs, _call_name(call_type))

    def close(self) -> None:
        self.conversations.close()


def completion(*args: Any, callback: ChatcliCallback | None = None, **kwargs: Any) -> Any:
    """``litellm.completion`` with the history cleaned first (by ``callback``, default one
    shared by every caller of this function)."""
    cleaner = callback if callback is not None else _shared()
    if args:  # litellm.completion(model, messages, ...)
        kwargs = {"model": args[0], **({"messages": args[1]} if len(args) > 1 else {}), **kwargs}
        args = args[2:]
    return litellm.completion(*args, **cleaner.clean(kwargs, "completion"))


_SHARED: list[ChatcliCallback] = []


def _shared() -> ChatcliCallback:
    if not _SHARED:
        _SHARED.append(ChatcliCallback())
    return _SHARED[0]


def _call_name(call_type: Any) -> str:
    return str(getattr(call_type, "value", call_type))


def __getattr__(name: str) -> Any:
    """``proxy_handler_instance``, the object LiteLLM's ``config.yaml`` names, is made on
    first use (loading the policy of ``$CHATCLI_POLICY``)."""
    if name == "proxy_handler_instance":
        return _shared()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
