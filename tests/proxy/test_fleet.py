"""A team's proxy (issue 44, item 7): three ``chatcli-mw serve`` replicas on one PostgreSQL
database behind a round-robin load balancer, each session's requests spread over them by
the official SDKs and by Claude Code; PostgreSQL stopped for 20 s under load, and one
replica drained, killed with SIGKILL while its records wait in its outbox, and started
again. Every replica's ``/sessions`` then shows the fleet's sums: each session's tokens
equal what the provider's answers said, to the token, and no answer is counted twice."""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from agent_runs import Run
from agent_script import scripted
from agents import AGENT_LIST, missing
from balancer import Balancer
from database import PostgresServer
from prompt_cache import PromptCache
from proxy_stack import serve_process_handle
from servers import serving
from stand_in import Provider
from waiting import wait_for

pytestmark = pytest.mark.slow
logger = logging.getLogger(__name__)

#: Requests of each SDK session, the seconds between two (an agent thinks, runs tools: the
#: load goes on through the outage), and the sessions (half Anthropic, half OpenAI).
TURNS = 16
PACE = 1.5
SESSIONS = 4
#: Seconds PostgreSQL is stopped, under load.
OUTAGE = 20.0


def prompt_and_output(fmt: str, usage: dict[str, Any]) -> tuple[int, int]:
    """A provider's usage as its documentation defines it: every prompt token however it
    was billed (Anthropic's three fields add up; OpenAI's prompt_tokens holds its cached
    ones), and the output."""
    if fmt == "anthropic":
        prompt = sum(
            usage.get(field) or 0
            for field in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        )
        return prompt, usage.get("output_tokens") or 0
    return usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0


def billed(ledger: dict[str, Any]) -> tuple[int, int]:
    tokens = ledger["billed"]
    prompt = sum(tokens[k] for k in ("input", "cache_read", "cache_write_5m", "cache_write_1h"))
    return prompt, tokens["output"]


def converse(url: str, session: int, said: dict[str, tuple[int, int]]) -> None:
    """One SDK session of :data:`TURNS` requests through the balancer, each answer's
    usage as the client read it added to ``said``."""
    name = f"fleet-{session}"
    history: list[dict[str, Any]] = []
    prompt = output = 0
    if session % 2 == 0:
        client = anthropic.Anthropic(base_url=url, api_key=f"sk-ant-{session}", max_retries=0)
        with client:
            for turn in range(TURNS):
                time.sleep(PACE)
                history.append({"role": "user", "content": f"Turn {turn} of {name}. " * 60})
                answer = client.messages.create(
                    model="claude-sonnet-4-5",
                    max_tokens=20,
                    messages=history,
                    extra_headers={"x-chatcli-session": name, "x-chatcli-tags": "team=fleet"},
                )
                history.append({"role": "assistant", "content": answer.content[0].text})  # type: ignore[union-attr]
                p, o = prompt_and_output("anthropic", answer.usage.model_dump())
                prompt, output = prompt + p, output + o
    else:
        chat = openai.OpenAI(base_url=url + "/v1", api_key=f"sk-{session}", max_retries=0)
        with chat:
            for turn in range(TURNS):
                time.sleep(PACE)
                history.append({"role": "user", "content": f"Turn {turn} of {name}. " * 60})
                done = chat.chat.completions.create(
                    model="gpt-4.1",
                    messages=history,  # type: ignore[arg-type]
                    extra_headers={"x-chatcli-session": name, "x-chatcli-tags": "team=fleet"},
                )
                history.append({"role": "assistant", "content": done.choices[0].message.content})
                assert done.usage is not None
                p, o = prompt_and_output("openai", done.usage.model_dump())
                prompt, output = prompt + p, output + o
    said[name] = (prompt, output)


def test_three_replicas_agree_through_a_kill_and_a_database_outage(
    postgres: PostgresServer, postgres_url: str, tmp_path: Path
) -> None:
    claude = next(agent for agent in AGENT_LIST if agent.name == "claude")
    provider = Provider(script=scripted(claude.tools, "anthropic"), cache=PromptCache())
    overrides = {"ledger.url": postgres_url, "ledger.held_bytes": 16 * 1024 * 1024}
    with ExitStack() as stack:
        upstream = stack.enter_context(serving(provider.app()))
        replicas: list[tuple[str, subprocess.Popen[str]]] = [
            stack.enter_context(serve_process_handle(upstream, overrides)) for _ in range(3)
        ]
        urls = [url for url, _ in replicas]
        balancer = Balancer(list(urls))
        front = stack.enter_context(serving(balancer.app()))

        said: dict[str, tuple[int, int]] = {}
        failures: list[BaseException] = []

        def session(n: int) -> None:
            try:
                converse(front, n, said)
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=session, args=(n,)) for n in range(SESSIONS)]
        for thread in threads:
            thread.start()
        time.sleep(3 * PACE)  # under way
        postgres.stop()
        outage = time.monotonic()
        # While the database is away, a replica is drained and killed with what it billed
        # still in its outbox, and started again on its port.
        victim, process = replicas[1]
        balancer.drain(victim)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        port = int(victim.rsplit(":", 1)[1])
        restarted = stack.enter_context(serve_process_handle(upstream, overrides, port=port))
        assert restarted[0] == victim
        balancer.draining.discard(victim)
        health = httpx.get(victim + "/healthz", timeout=10).json()
        assert health["records"]["reachable"] is False or health["status"] == "degraded"
        time.sleep(max(0.0, OUTAGE - (time.monotonic() - outage)))
        postgres.start()
        for thread in threads:
            thread.join(300)
        assert failures == []
        assert sorted(balancer.served) == sorted(urls)  # every replica served some

        # Claude Code, its requests spread over the replicas too.
        if missing("claude") is None:
            home, project = tmp_path / "home", tmp_path / "project"
            home.mkdir()
            project.mkdir()
            env = claude.configure(home, project, front)
            run = Run(claude.argv("Say ok.", False), project, env).start().wait(300)
            assert run.returncode == 0, run.explain()

        expected_answers = len(provider.cache.reported)  # type: ignore[union-attr]
        total_prompt = total_output = 0
        for fmt, usage in provider.cache.reported:  # type: ignore[union-attr]
            p, o = prompt_and_output(fmt, usage)
            total_prompt, total_output = total_prompt + p, total_output + o

        def everything_recorded(url: str) -> bool:
            answer = httpx.get(url + "/sessions", timeout=30)
            return (
                answer.status_code == 200 and answer.json()["total"]["requests"] == expected_answers
            )

        for url in urls:
            if not wait_for(lambda url=url: everything_recorded(url), 60):
                seen = httpx.get(url + "/sessions", timeout=30)
                health = httpx.get(url + "/healthz", timeout=30).text
                pytest.fail(
                    f"{url}: {seen.status_code} {seen.text[:600]} (expected "
                    f"{expected_answers} answers); {health}"
                )
            listed = httpx.get(url + "/sessions", params={"limit": 100}, timeout=30).json()
            assert billed(listed["total"]) == (total_prompt, total_output)
            assert listed["total"]["unread"] == 0
            for name, tokens in said.items():
                one = httpx.get(f"{url}/sessions/{name}", timeout=30).json()
                assert one["requests"] == TURNS and billed(one) == tokens, (url, name)
            fleet = httpx.get(url + "/sessions", params={"tag": "team=fleet"}, timeout=30).json()
            assert fleet["total"]["requests"] == SESSIONS * TURNS
            # Its console shows every request of each session, whichever replica served
            # it, numbered 1 to TURNS, each with its bill.
            for name, tokens in said.items():
                page = httpx.get(
                    f"{url}/ui/api/sessions/{name}", params={"limit": 100}, timeout=30
                ).json()
                requests = page["requests"]
                assert sorted(r["n"] for r in requests) == list(range(1, TURNS + 1)), (url, name)
                assert len({r["replica"] for r in requests}) > 1, (url, name)
                assert all(r["bill"] is not None for r in requests), (url, name)
                assert billed(page["ledger"]) == tokens
    # No answer twice: the database holds one row per answer the provider gave.
    rows = postgres.psql(postgres_url.rsplit("/", 1)[1], "SELECT count(*) FROM chatcli_answers")
    assert int(rows) == expected_answers
    logger.warning(
        "fleet: %d answers (%d prompt, %d output tokens) through 3 replicas (served %s), "
        "PostgreSQL stopped %g s, one replica killed; every replica's sums equal them; "
        "%s rows in chatcli_answers",
        expected_answers,
        total_prompt,
        total_output,
        {url.rsplit(":", 1)[1]: balancer.served.get(url, 0) for url in urls},
        OUTAGE,
        rows,
    )
