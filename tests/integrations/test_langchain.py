"""LangChain v1 agents: ChatcliMiddleware in a real create_agent loop with LangChain's fake
chat model (issue 15, item 3)."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from middleware.integrations.langchain import ChatcliMiddleware


class RecordingModel(GenericFakeChatModel):
    """LangChain's fake model, recording what each model call was given."""

    seen: list[list[BaseMessage]]

    def bind_tools(self, tools: Any, **kwargs: Any) -> RecordingModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


@tool
def dump_log() -> str:
    """Print the build log."""
    return "log line\n" * 37_500  # 337,500 characters


def agent_run(use_async: bool) -> tuple[dict[str, Any], list[list[BaseMessage]], Any]:
    model = RecordingModel(messages=iter([
        AIMessage(content="", tool_calls=[{"id": "call_1", "name": "dump_log", "args": {}}]),
        AIMessage(content="The build failed."),
    ]), seen=[])  # fmt: skip
    chatcli = ChatcliMiddleware()
    agent = create_agent(model, [dump_log], middleware=[chatcli])
    history = [
        HumanMessage("Start the build."),
        AIMessage(content="", tool_calls=[{"id": "old_1", "name": "dump_log", "args": {}}]),
        HumanMessage("Why did it fail?"),  # old_1 was never answered
    ]
    state = {"messages": history}
    out = asyncio.run(agent.ainvoke(state)) if use_async else agent.invoke(state)
    chatcli.close()
    return out, model.seen, chatcli


def check(out: dict[str, Any], seen: list[list[BaseMessage]], chatcli: Any) -> None:
    assert out["messages"][-1].content == "The build failed."
    first, second = seen
    # The dangling call got an error result the provider accepts, as a LangChain message.
    answer = first[2]
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == "old_1"
    assert answer.status == "error"
    assert first[0] is out["messages"][0]  # untouched: the agent's own object
    # The 337,500-character tool output was bounded before the model saw it...
    bounded = second[-1]
    assert isinstance(bounded, ToolMessage) and len(bounded.content) < 10_000
    assert "full output saved to" in bounded.content
    assert bounded.id == out["messages"][4].id  # a copy of the agent's message
    # ...while the agent's state keeps it whole.
    assert len(out["messages"][4].content) == 337_500
    assert [a.kind for a in chatcli.last_report.actions] == ["synthetic_result", "spilled"]


def test_a_create_agent_loop_sees_paired_and_bounded_messages() -> None:
    check(*agent_run(use_async=False))


def test_the_async_loop_too() -> None:
    check(*agent_run(use_async=True))
