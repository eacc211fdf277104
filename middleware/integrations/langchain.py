"""LangChain v1 agents: ``create_agent(model, tools, middleware=[ChatcliMiddleware()])``.

Before every model call, the agent's message list goes through the pipeline: LangChain
messages are read as Chat Completions messages (``AIMessage.tool_calls``,
``ToolMessage.tool_call_id``), cleaned, and written back as LangChain messages. A message no
step changed is the agent's own object; a changed one is a copy of it with the new content
(its id, name and metadata kept); a result the repair adds is a ``ToolMessage`` with
``status="error"``. The agent's state keeps the full history: only what the model sees is
cleaned, so the spill files named in it hold everything cut. With ``recall_tool=True`` the
agent is also given a ``recall`` tool that reads lines of a spilled output, and previews
say to use it: an agent without file tools still reaches what was cut.

Each model call is cleaned by its conversation as the proxy and :func:`middleware.wrap`
clean a request (:class:`~middleware.conversations.front.Conversations`), at the time it
is made: a call after the prompt cache went cold may be rewritten for free. A history the
pipeline cannot process goes to the model as it was, and the failure is logged.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from middleware.errors import MissingExtraError

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )
    from langchain_core.tools import BaseTool, StructuredTool
except ImportError as exc:  # pragma: no cover - exercised by the extras test
    raise MissingExtraError(
        "langchain", "langchain>=1.0", "middleware.integrations.langchain"
    ) from exc

import anyio.to_thread

from middleware.conversations.front import Conversations
from middleware.formats import get_codec
from middleware.integrations import recall
from middleware.plugin.host import PluginHost
from middleware.policy import Policy, load_policy
from middleware.policy.settings import bind
from middleware.report import Report
from middleware.spill import SpillSettings

#: The public names (tests/test_public_surface.py pins them).
__all__ = ["ChatcliMiddleware", "recall_tool_for"]

logger = logging.getLogger(__name__)

#: Where a converted message remembers which LangChain message it came from (never sent).
_ORIGIN = "_chatcli_origin"
#: The key of the middleware's policy in its pool.
KEY = "langchain"


class ChatcliMiddleware(AgentMiddleware):
    """Cleans the messages of every model call of a LangChain agent.

    :param policy: a policy file, ``preset:NAME``, a loaded :class:`Policy`, or ``None``
        for ``$CHATCLI_POLICY`` else the embedded default.
    :param session_id: the spill workspace's session (default: one per middleware).
    :param recall_tool: give the agent a ``recall`` tool that reads lines of a spilled
        output, and have previews say to use it (``recall.form: tool``).
    """

    def __init__(
        self,
        policy: str | Path | Policy | None = None,
        session_id: str | None = None,
        *,
        recall_tool: bool = False,
    ) -> None:
        super().__init__()
        if recall_tool:
            loaded = recall.tool_policy(policy)
        else:
            loaded = policy if isinstance(policy, Policy) else load_policy(policy)
        self.policy = loaded
        self.session_id = session_id or f"lc-{uuid.uuid4().hex[:12]}"
        #: The conversation's state, and the ledger whose clock says when a call is made.
        self.conversations = Conversations.open(PluginHost.create(), loaded)
        #: The tools the agent is given besides its own (LangChain reads this).
        self.tools: list[BaseTool] = [recall_tool_for(loaded)] if recall_tool else []
        #: The report of the last model call (``None``: it went as it was).
        self.last_report: Report | None = None

    def clean(self, messages: Sequence[BaseMessage]) -> list[Any]:
        """``messages`` as the model should see them."""
        plain = [_to_chat(message, i) for i, message in enumerate(messages)]
        cleaned = self.conversations.history(
            plain, get_codec("openai"), (KEY, self.policy), session=self.session_id
        )
        self.last_report = cleaned.report
        if cleaned.messages is None or cleaned.report is None or not cleaned.report.changed:
            return list(messages)
        by_plain = {id(p): m for p, m in zip(plain, messages, strict=True)}
        return [by_plain.get(id(out)) or _from_chat(out, messages) for out in cleaned.messages]

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> Any:
        return handler(request.override(messages=self.clean(request.messages)))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Any:
        cleaned = await anyio.to_thread.run_sync(self.clean, request.messages)
        return await handler(request.override(messages=cleaned))

    def close(self) -> None:
        """Release the spill workspace (its files go unless ``spill.keep``) and the ledger."""
        self.conversations.close()


def recall_tool_for(policy: Policy) -> BaseTool:
    """A ``recall`` tool reading lines of the outputs spilled under ``policy``."""
    settings = bind(policy, SpillSettings)

    def read(path: str, offset: int = 1, limit: int = recall.DEFAULT_LIMIT) -> str:
        return recall.read(settings, {"path": path, "offset": offset, "limit": limit})

    return StructuredTool.from_function(read, name=recall.NAME, description=recall.DESCRIPTION)


def _to_chat(message: BaseMessage, index: int) -> dict[str, Any]:
    """One LangChain message as a Chat Completions message."""
    content = message.content
    if isinstance(message, AIMessage):
        out: dict[str, Any] = {"role": "assistant", "content": content or None}
        if message.tool_calls:
            out["tool_calls"] = [
                {"id": call.get("id") or "", "type": "function",
                 "function": {"name": call["name"], "arguments": json.dumps(call["args"])}}
                for call in message.tool_calls
            ]  # fmt: skip
    elif isinstance(message, ToolMessage):
        out = {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}
    elif isinstance(message, SystemMessage):
        out = {"role": "system", "content": content}
    elif isinstance(message, HumanMessage):
        out = {"role": "user", "content": content}
    else:
        out = {"role": getattr(message, "role", message.type), "content": content}
    out[_ORIGIN] = index
    return out


def _from_chat(message: dict[str, Any], originals: Sequence[BaseMessage]) -> BaseMessage:
    """A LangChain message for one the pipeline changed or created."""
    origin = message.get(_ORIGIN)
    original = originals[origin] if isinstance(origin, int) else None
    content = message.get("content")
    if message["role"] == "tool":
        if original is not None:
            return original.model_copy(update={"content": content})
        return ToolMessage(content=content, tool_call_id=message["tool_call_id"], status="error")
    if message["role"] == "assistant":
        calls = [
            {"id": call["id"], "name": call["function"]["name"],
             "args": json.loads(call["function"]["arguments"] or "{}"), "type": "tool_call"}
            for call in message.get("tool_calls") or []
        ]  # fmt: skip
        if original is not None:
            return original.model_copy(update={"content": content or "", "tool_calls": calls})
        return AIMessage(content=content or "", tool_calls=calls)
    if original is not None:
        return original.model_copy(update={"content": content})
    return HumanMessage(content=content)
