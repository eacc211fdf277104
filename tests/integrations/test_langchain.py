"""LangChain v1 agents: ChatcliMiddleware in a real create_agent loop with LangChain's fake
chat model (issue 15, item 3)."""

from __future__ import annotations

import asyncio
import re
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


class FollowingModel(GenericFakeChatModel):
    """A model that runs ``dump_numbered``, then does what the preview it sees says."""

    #: The names of the tools it was offered.
    offered: list[str]

    def bind_tools(self, tools: Any, **kwargs: Any) -> FollowingModel:
        self.offered.extend(t.name for t in tools)
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        from langchain_core.outputs import ChatGeneration, ChatResult

        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:
            reply = AIMessage(
                content="", tool_calls=[{"id": "c1", "name": "dump_numbered", "args": {}}]
            )
        elif len(results) == 1:
            said = re.search(
                r"recall tool \(path (\S+), offset (\d+), limit (\d+)\)", str(results[0].content)
            )
            assert said is not None, results[0].content
            args = {
                "path": said.group(1),
                "offset": int(said.group(2)),
                "limit": int(said.group(3)),
            }
            reply = AIMessage(content="", tool_calls=[{"id": "c2", "name": "recall", "args": args}])
        else:
            reply = AIMessage(content="Read it.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def test_an_agent_without_file_tools_reads_the_rest_with_the_recall_tool() -> None:
    chatcli = ChatcliMiddleware(recall_tool=True)
    model = FollowingModel(messages=iter([]), offered=[])
    agent = create_agent(model, [dump_numbered], middleware=[chatcli])
    out = agent.invoke({"messages": [HumanMessage("Dump the log.")]})
    assert "recall" in model.offered
    preview = out["messages"][2].content
    read = out["messages"][4]
    assert isinstance(read, ToolMessage) and read.name == "recall"
    said = re.search(r"offset (\d+), limit (\d+)", chatcli.clean(out["messages"])[2].content)
    assert said is not None and "recall tool" not in preview  # the agent's state is whole
    first, count = int(said.group(1)), int(said.group(2))
    assert read.content == "".join(f"log line {i}\n" for i in range(first, first + count))
    assert out["messages"][-1].content == "Read it."
    chatcli.close()


@tool
def dump_numbered() -> str:
    """Print the numbered build log."""
    return "".join(f"log line {i}\n" for i in range(1, 3001))


def test_a_loaded_policy_must_name_the_tool_form() -> None:
    import pytest

    import middleware

    with pytest.raises(ValueError, match=r"recall\.form: tool"):
        ChatcliMiddleware(middleware.load_policy(None), recall_tool=True)
    tool_policy = middleware.load_policy(None, overrides={"recall.form": "tool"})
    ChatcliMiddleware(tool_policy, recall_tool=True).close()
