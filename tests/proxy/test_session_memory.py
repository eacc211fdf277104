"""The proxy holds its conversations' state under proxy.session_memory_bytes: over it, the
conversations used least recently forget theirs, and what is forwarded stays the same
bytes (issue 26, item 3; issue 27, item 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from proxy_stack import running
from stand_in import Provider
from waiting import wait_for

import middleware
from middleware.policy.settings import bind
from middleware.proxy.settings import ProxySettings

HEADERS = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}


def history(name: str, turns: int) -> list[dict[str, Any]]:
    """A conversation of ``turns`` Bash calls, every other result over the result cap."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Task {name}."}]
    for i in range(turns):
        call = {
            "type": "tool_use",
            "id": f"toolu_{name}_{i}",
            "name": "Bash",
            "input": {"command": f"make {i}"},
        }
        lines = 400 if i % 2 else 60
        text = "\n".join(f"{name} {i}: line {n} of the build, all fine" for n in range(lines))
        messages.append({"role": "assistant", "content": [call]})
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": text}],
            }
        )
    return messages


def forwarded(stack_url: str, provider: Provider) -> list[Any]:
    """Three conversations, interleaved, four requests each: the bodies the upstream got."""
    with httpx.Client(timeout=60) as client:
        for turns in range(1, 5):
            for name in ("a", "b", "c"):
                body = {"model": "m", "max_tokens": 10, "messages": history(name, turns)}
                headers = {**HEADERS, "x-chatcli-session": name}
                answer = client.post(stack_url + "/v1/messages", json=body, headers=headers)
                assert answer.status_code == 200, answer.text
    return [body for _, _, body in provider.accepted]


def metric(url: str, name: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def test_a_proxy_over_its_session_budget_forwards_the_same_bodies(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    stand_in, _ = provider
    with running(provider, tmp_path) as roomy:
        expected = forwarded(roomy.url, stand_in)
        assert metric(roomy.url, "chatcli_proxy_session_evictions_total") == 0
        assert metric(roomy.url, "chatcli_proxy_session_state_bytes") > 0
        assert metric(roomy.url, "chatcli_proxy_cache_bytes") > 0
    stand_in.accepted.clear()
    with running(provider, tmp_path, None, **{"proxy.session_memory_bytes": 0}) as tight:
        assert forwarded(tight.url, stand_in) == expected
        # every conversation forgets its state once its request is done
        assert metric(tight.url, "chatcli_proxy_session_evictions_total") >= 11
        assert metric(tight.url, "chatcli_proxy_session_state_bytes") == 0
        assert metric(tight.url, "chatcli_proxy_sessions") == 3
        ended = httpx.delete(tight.url + "/sessions/a")
        assert ended.json()["released"] == 1
        assert metric(tight.url, "chatcli_proxy_sessions") == 2


#: The proxy section of the embedded default policy.
DEFAULTS = bind(middleware.load_policy(None, env={}, dotenv_path=False), ProxySettings)


def test_the_memory_limits_follow_a_reloaded_policy(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "version: 1\nproxy:\n  session_memory_bytes: 0\n  cleaning_bytes: 1000\n", "utf-8"
    )
    stand_in, _ = provider
    with running(provider, tmp_path, str(policy)) as stack:
        forwarded(stack.url, stand_in)  # bodies over 1,000 bytes: cleaned one at a time
        assert stack.proxy.conversations.pool.max_bytes == 0 and stack.proxy.cleaning.limit == 1000
        evicted = metric(stack.url, "chatcli_proxy_session_evictions_total")
        policy.write_text("version: 1\nproxy:\n  session_memory_bytes: 100000000\n", "utf-8")
        assert wait_for(lambda: stack.proxy.catalog.default.status.generation == 2)
        forwarded(stack.url, stand_in)
        assert stack.proxy.conversations.pool.max_bytes == 100_000_000
        assert stack.proxy.cleaning.limit == DEFAULTS.cleaning_bytes  # back to the default
        assert metric(stack.url, "chatcli_proxy_session_evictions_total") == evicted
        assert metric(stack.url, "chatcli_proxy_session_state_bytes") > 0
