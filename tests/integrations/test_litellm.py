"""LiteLLM: the proxy's hook called as its proxy calls it, the library's callbacks, and the
synchronous wrapper (issue 15, item 4)."""

from __future__ import annotations

import asyncio
import importlib
from types import ModuleType
from typing import Any

import pytest
from stand_in import Provider

HISTORY = [
    {"role": "user", "content": "List the files."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "file\n" * 40_000},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_2", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
]  # fmt: skip


@pytest.fixture
def litellm() -> ModuleType:
    """LiteLLM, imported by the tests that use it, when they run: importing it takes 3-4 s,
    which collection would cost every worker of the suite."""
    return importlib.import_module("litellm")


def test_the_proxy_hook_cleans_the_request_as_the_proxy_calls_it(litellm: ModuleType) -> None:
    from litellm.caching.dual_cache import DualCache
    from litellm.proxy._types import UserAPIKeyAuth

    from middleware.integrations.litellm import ChatcliCallback

    callback = ChatcliCallback()
    data = {"model": "gpt-4.1", "messages": HISTORY, "metadata": {"team": "a"}}
    out = asyncio.run(
        callback.async_pre_call_hook(UserAPIKeyAuth(), DualCache(), data, "completion")
    )
    assert out["metadata"] == {"team": "a"} and data["messages"] is HISTORY  # not mutated
    assert len(out["messages"][2]["content"]) < 10_000
    assert out["messages"][4]["tool_call_id"] == "call_2"  # the dangling call answered
    responses = {
        "model": "gpt-4.1",
        "input": [{"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"}],
    }
    cleaned = asyncio.run(
        callback.async_pre_call_hook(UserAPIKeyAuth(), DualCache(), responses, "aresponses")
    )
    assert cleaned["input"][1]["type"] == "function_call_output"


# LiteLLM keeps the HTTP clients it makes and never closes them; the one the async call
# made belongs to a loop already closed, and the collector may find it during teardown.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_library_calls_through_callbacks_and_the_sync_wrapper(
    litellm: ModuleType, provider: tuple[Provider, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from middleware.integrations.litellm import ChatcliCallback, completion

    stand_in, url = provider
    callback = ChatcliCallback()
    monkeypatch.setattr(litellm, "callbacks", [callback])
    args: dict[str, Any] = {"model": "openai/gpt-test", "api_base": f"{url}/v1", "api_key": "k"}
    with pytest.raises(litellm.BadRequestError):  # litellm.completion itself: not cleaned
        litellm.completion(messages=HISTORY, **args)
    answer = asyncio.run(litellm.acompletion(messages=HISTORY, **args))
    assert answer.choices[0].message.content == "ok"
    assert completion(messages=HISTORY, callback=callback, **args).choices[0].message.content
    sent = [body["messages"] for _, _, body in stand_in.accepted]
    assert len(sent) == 2 and all(len(m[2]["content"]) < 10_000 and len(m) == 5 for m in sent)


def test_a_request_it_cannot_read_goes_as_it_was(litellm: ModuleType) -> None:
    from middleware.integrations.litellm import ChatcliCallback

    callback = ChatcliCallback()
    odd = {"model": "m", "messages": [{"role": ["user"], "content": "x"}]}
    assert callback.clean(odd) == odd
