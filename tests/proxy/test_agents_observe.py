"""Observe mode with the real agent CLIs: each one's session goes to the provider exactly
as the agent wrote it (its big output whole, where cleaning would have spilled it), and the
proxy's ledger says what that session was billed and what cleaned it would have been
(``chatcli-mw serve --observe``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest
from agent_events import results
from agent_runs import Run
from agent_script import RUN_SEVERAL, SEVERAL, big_output, scripted
from agents import AGENT_LIST, Agent, missing
from prompt_cache import PromptCache
from proxy_stack import serve_process
from servers import serving
from stand_in import Provider
from waiting import wait_for

logger = logging.getLogger(__name__)

#: One agent per wire format is enough here (opencode on the Responses API repeats Codex).
AGENTS = [agent for agent in AGENT_LIST if agent.name != "opencode-openai"]


#: A policy pricing every model alike (Claude Sonnet's prices), so every agent's figures
#: are in dollars.
PRICED = """version: 1
ledger:
  prices:
    "*": {input: 3, output: 15, cache_read: 0.3, cache_write_5m: 3.75, cache_write_1h: 6}
"""


@pytest.mark.slow
@pytest.mark.parametrize("agent", AGENTS, ids=[agent.name for agent in AGENTS])
def test_each_agents_session_goes_as_it_came_and_its_saving_is_projected(
    agent: Agent, tmp_path: Path
) -> None:
    why = missing(agent.cli)
    if why is not None:
        pytest.skip(why)
    provider = Provider(script=scripted(agent.tools, agent.fmt), cache=PromptCache())
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    overrides = {"spill.root": str(tmp_path / "spill")}
    policy = tmp_path / "policy.yaml"  # whatever model the agent names, at one price
    policy.write_text(PRICED)
    with (
        serving(provider.app()) as upstream,
        serve_process(upstream, overrides, policy=str(policy), options=["--observe"]) as url,
    ):
        env = agent.configure(home, project, url)
        run = Run(agent.argv(RUN_SEVERAL, False), project, env).start().wait(300)
        assert run.returncode == 0, run.explain()
        answers = len(provider.cache.reported) if provider.cache else 0
        assert wait_for(lambda: httpx.get(url + "/sessions").json()["total"]["requests"] >= answers)
        total = httpx.get(url + "/sessions").json()["total"]
    # The big outputs reached the model whole: nothing was cleaned.
    seen = [t for _, _, body in provider.accepted for t in results(agent.fmt, body)]
    last = chr(ord("a") + SEVERAL - 1)
    assert any(big_output(last).strip() in text for text in seen)
    observe = total["observe"]
    assert observe["answers"] == total["requests"] - total["unread"] > 0
    assert observe["projected"] >= 1 and total["saved_dollars"] == 0
    logger.info("%s observed: %s", agent.cli, json.dumps(
        {"billed": total["billed"]["dollars"], "would_have": observe["would_have_dollars"],
         "readbacks": total["readbacks"]["count"], "projected": observe["projected"],
         "answers": observe["answers"]}))  # fmt: skip
    assert observe["would_have_saved_dollars"] > 0
