"""The real Claude Code CLI through the proxy: a scripted multi-turn session (the stand-in
model runs Bash commands whose output is 25,000 characters, under Claude Code's own limit but
over the policy's cap) completes, streamed, and the bodies the provider received show the
product's work while every field Claude Code sends passes through as it was.

`.ci/run` installs the npm package into .cache/agents; set CHATCLI_TEST_CLAUDE to use
another `claude` binary. tests/proxy/test_agents.py plays the scenarios every agent shares
(read-back, resume, concurrent sessions, interruption).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import AGENT_BY_NAME, missing
from prompt_cache import PromptCache
from servers import serving
from stand_in import Call, Provider, Reply
from waiting import wait_for

from middleware.ledger import Usage, read_usage
from middleware.proxy.build import build_proxy

#: Slow (seconds each): `-m "not slow"` leaves it out of a quick run.
pytestmark = pytest.mark.slow

if missing("claude"):
    pytest.skip(missing("claude"), allow_module_level=True)
CLAUDE = AGENT_BY_NAME["claude"]

BIG = "python3 -c \"print(('x' * 99 + '\\n') * 250, end='')\""  # 25,000 characters
COMMANDS = [BIG, BIG, "echo small one", "echo small two", "echo small three"]
#: Compact on every turn (the default waits until a rewrite pays for the cache it breaks,
#: which a five-turn session never reaches).
POLICY = {
    "microcompact.schedule.rewrite_cost": 0,
    "microcompact.schedule.expected_turns_min": 0,
    "microcompact.summarize_turns": 3,
    # The model the tests name, priced as a policy prices one the table does not know.
    "ledger.prices.claude-stand-in": {
        "input": 3,
        "output": 15,
        "cache_read": 0.3,
        "cache_write_5m": 3.75,
        "cache_write_1h": 6,
    },
}


def results(body: dict[str, Any]) -> list[str]:
    out = []
    for message in body["messages"]:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                text = inner if isinstance(inner, str) else json.dumps(inner)
                out.append(text)
    return out


def script(fmt: str, body: dict[str, Any]) -> Reply:
    done = len(results(body))
    if done < len(COMMANDS):
        return Reply(calls=(Call("Bash", {"command": COMMANDS[done], "description": "run"}),))
    return Reply(text="All five commands ran.")


class Recorder:
    """An ASGI wrapper that keeps every request body the proxy receives, as it came."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.bodies: list[dict[str, Any]] = []
        #: Requests the proxy worked on in their new part only.
        self.continued: float | None = None
        #: The proxy's ledger once the session ended.
        self.ledger: dict[str, Any] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/messages":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []

        async def recording() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    self.bodies.append(json.loads(b"".join(chunks)))
            return message

        await self.app(scope, recording, send)


@pytest.fixture
def session(
    tmp_path: Path,
) -> Iterator[tuple[subprocess.CompletedProcess[str], Provider, Recorder]]:
    provider = Provider(script=script, cache=PromptCache())
    with serving(provider.app()) as upstream:
        overrides = {**POLICY, "proxy.upstreams.anthropic": upstream, "spill.root": str(tmp_path)}
        proxy, app = build_proxy(None, overrides)
        recorder = Recorder(app)
        with serving(recorder) as url:
            home = tmp_path / "home"
            home.mkdir()
            done = subprocess.run(
                CLAUDE.argv("Run the five commands.", False),
                env=CLAUDE.configure(home, tmp_path, url),
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
                stdin=subprocess.DEVNULL,
            )
            recorder.continued = proxy.metrics.registry.get_sample_value(
                "chatcli_proxy_continued_total"
            )
            answered = len(provider.cache.reported)  # type: ignore[union-attr]
            assert wait_for(lambda: proxy.ledger.total()["requests"] == answered)
            recorder.ledger = proxy.ledger.total()
            yield done, provider, recorder


def test_a_claude_code_session_completes_through_the_proxy(
    session: tuple[subprocess.CompletedProcess[str], Provider, Recorder],
) -> None:
    done, provider, recorder = session
    assert done.returncode == 0, done.stderr[-3000:]
    assert "All five commands ran." in done.stdout
    assert not provider.refused
    bodies = [body for path, _, body in provider.accepted if path == "/v1/messages"]
    assert len(bodies) == len(COMMANDS) + 1
    assert all(body.get("stream") is True for body in bodies)  # streamed, every turn

    # Bounded: Claude Code sent the 25,000-character outputs whole, the provider never saw one.
    assert max(len(text) for body in recorder.bodies for text in results(body)) >= 24_000
    assert all(len(text) <= 20_000 for body in bodies for text in results(body))
    first = results(bodies[2])[0]
    assert "chars omitted — full output saved to" in first
    saved = Path(first.split("full output saved to ")[1].split("]")[0])
    assert saved.read_text(encoding="utf-8").startswith("x" * 99 + "\n")

    # Compacted: by the last request the oldest outputs are one-line summaries.
    last = results(bodies[-1])
    assert last[0].startswith("[Old tool result cleared") and last[1].startswith("[Old tool")

    # Claude Code moves its cache marker to the last message on every request: from the
    # third request on, each still continues the one before it, from the turns they share.
    assert recorder.continued == len(bodies) - 2

    # Everything else Claude Code sends passes through as it was.
    for sent, received in zip(recorder.bodies, bodies, strict=True):
        assert {k: v for k, v in sent.items() if k != "messages"} == {
            k: v for k, v in received.items() if k != "messages"
        }
        system_sent = [m for m in sent["messages"] if m["role"] == "system"]
        assert system_sent == [m for m in received["messages"] if m["role"] == "system"]
    for key in ("system", "tools", "thinking", "context_management", "metadata"):
        assert key in bodies[-1], key
    headers = provider.accepted[-1][1]
    assert "claude-code" in headers["anthropic-beta"] and headers["x-api-key"] == "sk-ant-test"
    assert any(m["role"] == "system" for m in bodies[-1]["messages"])

    # The ledger read every answer's usage as Claude Code streamed it, to the token; the
    # outputs the proxy spilled would have been sent, so it estimates more without it.
    billed = Usage()
    for fmt, usage in provider.cache.reported:  # type: ignore[union-attr]
        billed += read_usage(fmt, usage) or Usage()
    ledger = recorder.ledger
    assert ledger["unread"] == 0 and billed.cache_read > 0
    assert {kind: ledger["billed"][kind] for kind in billed.as_dict()} == billed.as_dict()
    assert ledger["without"]["dollars"] > ledger["billed"]["dollars"] > 0
