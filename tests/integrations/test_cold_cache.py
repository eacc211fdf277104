"""Every host cleans a request at the time it is sent (issue 47, item 2): after a pause
past the prompt cache's lifetime (``ledger.cache_lifetime_seconds``, 300 s), a request of
the session finds the cache cold, and microcompaction rewrites what a warm cache would not
pay to rewrite; the requests after it keep the old turns as that one rewrote them. The
proxy's test is ``tests/proxy/test_ledger.py``; here, ``wrap()``, LangChain's middleware
and LiteLLM's callback, each driven by its real library, time given by the clock of the
host's ledger (as the proxy's tests give it)."""

from __future__ import annotations

import importlib
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from billing_builders import Clock, output
from servers import serving
from stand_in import Provider

import middleware
from middleware.integrations.sdk import cleaner_of

#: A schedule that never pays for a rewrite in a warm cache in this short session.
THRIFTY = {
    "microcompact.schedule.rewrite_cost": 10_000.0,
    "microcompact.schedule.min_reclaim_tokens": 500,
}
TURNS = 10
#: The request sent after the pause.
AFTER_PAUSE = 7


def policy(root: Path) -> middleware.Policy:
    return middleware.load_policy(
        None, env={}, dotenv_path=False, overrides={**THRIFTY, "spill.root": str(root)}
    )


def pause(clock: Clock, idle: bool, turn: int) -> None:
    """Time passes before request ``turn``: 10 s, or 10 minutes before the one after the
    pause of an ``idle`` session."""
    clock.now += 600 if idle and turn == AFTER_PAUSE else 10


def chat_turns(turns: int) -> Iterator[list[dict[str, Any]]]:
    """An agent's Chat Completions histories: one grep and its long output a turn."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Find the slow handler."}]
    for turn in range(turns):
        yield list(history)
        call = f"call_{turn:02d}"
        arguments = json.dumps({"command": f"grep -rn handler src/part{turn}"})
        calls = [
            {"id": call, "type": "function", "function": {"name": "bash", "arguments": arguments}}
        ]
        history.append({"role": "assistant", "content": None, "tool_calls": calls})
        history.append({"role": "tool", "tool_call_id": call, "content": output(turn)})


def check_rewritten_after_the_pause(run: Callable[[bool, Path], list[Any]], tmp_path: Path) -> None:
    """``run(idle, root)``: the histories the model saw, spilling under ``root``."""

    def seen(case: str) -> list[Any]:
        root = tmp_path / case
        sent = run(case == "idle", root)
        assert len(sent) == TURNS
        # Each run spills to a folder of its own: named alike, the histories compare.
        named = json.dumps(str(root))[1:-1]
        return json.loads(json.dumps(sent).replace(named, "ROOT"))

    steady, idle = seen("steady"), seen("idle")
    changed = [k for k, (a, b) in enumerate(zip(steady, idle, strict=True)) if a != b]
    assert changed and changed[0] == AFTER_PAUSE  # the request after the pause
    assert len(json.dumps(idle[AFTER_PAUSE])) < len(json.dumps(steady[AFTER_PAUSE]))
    # After the pause, the cache warm again keeps what the cold request wrote.
    for before, after in itertools.pairwise(idle[AFTER_PAUSE:]):
        assert after[: len(before)] == before


# -- wrap() ---------------------------------------------------------------------------------


def wrapped_session(idle: bool, root: Path) -> list[Any]:
    stand_in = Provider()
    clock = Clock()
    with (
        serving(stand_in.app()) as url,
        anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as plain,
    ):
        client = middleware.wrap(plain, policy(root), session_id="s")
        cleaner_of(client).ledger.clock = clock
        for turn, messages in enumerate(anthropic_turns(TURNS)):
            pause(clock, idle, turn)
            client.messages.create(model="claude-sonnet-5", max_tokens=5, messages=messages)
        cleaner_of(client).close()
    return [body["messages"] for _, _, body in stand_in.accepted]


def anthropic_turns(turns: int) -> Iterator[list[dict[str, Any]]]:
    """:func:`chat_turns` as an Anthropic agent sends them."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Find the slow handler."}]
    for turn in range(turns):
        yield list(history)
        call = {
            "type": "tool_use",
            "id": f"toolu_{turn:02d}",
            "name": "Bash",
            "input": {"command": f"grep -rn handler src/part{turn}"},
        }
        result = {"type": "tool_result", "tool_use_id": call["id"], "content": output(turn)}
        history.append({"role": "assistant", "content": [call]})
        history.append({"role": "user", "content": [result]})


def test_wrap_rewrites_a_cold_cache(tmp_path: Path) -> None:
    check_rewritten_after_the_pause(wrapped_session, tmp_path)


# -- LangChain ------------------------------------------------------------------------------


def langchain_session(idle: bool, root: Path) -> list[Any]:
    """A ``create_agent`` loop whose model greps once a turn; time passes as the tool runs."""
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.tools import tool

    from middleware.integrations.langchain import ChatcliMiddleware

    class Recording(GenericFakeChatModel):
        seen: list[list[BaseMessage]]

        def bind_tools(self, tools: Any, **kwargs: Any) -> Recording:
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            self.seen.append(list(messages))
            return super()._generate(messages, *args, **kwargs)

    clock = Clock()

    @tool
    def bash(command: str) -> str:
        """Run a shell command."""
        turn = int(command.rsplit("part", 1)[1])
        pause(clock, idle, turn + 1)  # before the model call that reads its output
        return output(turn)

    replies = [
        AIMessage(
            content="",
            tool_calls=[
                {
                    "id": f"call_{turn:02d}",
                    "name": "bash",
                    "args": {"command": f"grep -rn handler src/part{turn}"},
                }
            ],
        )
        for turn in range(TURNS - 1)
    ]
    model = Recording(messages=iter([*replies, AIMessage(content="Found it.")]), seen=[])
    chatcli = ChatcliMiddleware(policy(root), session_id="s")
    chatcli.conversations.ledger.clock = clock
    agent = create_agent(model, [bash], middleware=[chatcli])
    agent.invoke({"messages": [{"role": "user", "content": "Find the slow handler."}]})
    chatcli.close()
    return [[(m.type, m.content) for m in messages] for messages in model.seen]


def test_langchain_rewrites_a_cold_cache(tmp_path: Path) -> None:
    check_rewritten_after_the_pause(langchain_session, tmp_path)


# -- LiteLLM --------------------------------------------------------------------------------


@pytest.fixture
def litellm_session() -> Callable[[bool, Path], list[Any]]:
    """LiteLLM, imported when the test runs (importing it takes seconds)."""
    importlib.import_module("litellm")
    from middleware.integrations.litellm import ChatcliCallback, completion

    def run(idle: bool, root: Path) -> list[Any]:
        stand_in = Provider()
        clock = Clock()
        callback = ChatcliCallback(policy(root))
        callback.conversations.ledger.clock = clock
        with serving(stand_in.app()) as url:
            for turn, messages in enumerate(chat_turns(TURNS)):
                pause(clock, idle, turn)
                completion(
                    model="openai/gpt-test",
                    api_base=f"{url}/v1",
                    api_key="k",
                    messages=messages,
                    callback=callback,
                )
        callback.close()
        return [body["messages"] for _, _, body in stand_in.accepted]

    return run


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_litellm_rewrites_a_cold_cache(
    litellm_session: Callable[[bool, Path], list[Any]], tmp_path: Path
) -> None:
    check_rewritten_after_the_pause(litellm_session, tmp_path)
