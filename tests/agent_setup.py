"""One real agent CLI pointed at a ``chatcli-mw serve`` (a process of its own) in front of
the provider stand-in, set up as docs/proxy.md says, the scripted model playing its
scenarios: what the tests of tests/proxy/ that run the agents share."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_runs import Run
from agent_script import scripted
from agents import Agent, binary, missing
from prometheus_client.parser import text_string_to_metric_families
from prompt_cache import PromptCache
from proxy_stack import access_log, serve_process
from servers import serving
from stand_in import Provider


@dataclass
class Setup:
    """One agent pointed at a ``chatcli-mw serve`` in front of the stand-in."""

    agent: Agent
    provider: Provider
    url: str
    log: Path
    spill: Path
    project: Path
    env: dict[str, str]
    upstream: str
    #: Every run started, so that a test failing half-way leaves no agent running.
    started: list[Run] = field(default_factory=list)

    def run(self, prompt: str, *, resume: bool = False, timeout: float = 300) -> Run:
        done = self.start(prompt, resume=resume).wait(timeout)
        assert done.returncode == 0, done.explain()
        return done

    def start(self, prompt: str, *, resume: bool = False, env: dict[str, str] | None = None) -> Run:
        run = Run(self.agent.argv(prompt, resume), self.project, {**self.env, **(env or {})})
        self.started.append(run.start())
        return run

    def prepared(self, store: Path | None = None) -> dict[str, str]:
        """The environment of a run with its own session store under ``store`` (for an
        agent that cannot share one between runs at once), set up as a first run does."""
        env = {}
        if store is not None and self.agent.store_env is not None:
            env[self.agent.store_env] = str(store)
        if self.agent.prepare:
            argv = [str(binary(self.agent.cli)), *self.agent.prepare]
            prepared = Run(argv, self.project, {**self.env, **env}).start().wait(120)
            assert prepared.returncode == 0, prepared.explain()
        return env

    def stop(self) -> None:
        """Kill every run still going (what a failed assertion left behind)."""
        for run in self.started:
            if run.returncode is None:
                run.kill()

    def bodies(self) -> list[dict[str, Any]]:
        """What the provider received on the agent's model route, in order."""
        return [
            body
            for path, _, body in self.provider.accepted
            if MODEL_ROUTE.search(path) and body.get("tools")
        ]

    def cleaned(
        self, until: Callable[[list[dict[str, Any]]], bool] | None = None
    ) -> list[dict[str, Any]]:
        """The access-log lines of the requests the proxy cleaned; with ``until``, once
        they satisfy it (a line is written after its answer has gone out), or after 10 s."""
        deadline = time.monotonic() + 10
        while True:
            lines = [line for line in access_log(self.log) if line.get("session")]
            if until is None or until(lines) or time.monotonic() > deadline:
                return lines
            time.sleep(0.05)


#: The agents' model routes at the provider (Gemini's name the model in the path).
MODEL_ROUTE = re.compile(r"^/v1/(messages|responses)$|:(stream)?[gG]enerateContent$")


#: The model the tests name for Claude Code, priced as a policy prices one the table does
#: not know (its read-backs then have a cost in dollars).
PRICED = {
    "ledger.prices.claude-stand-in": {
        "input": 3,
        "output": 15,
        "cache_read": 0.3,
        "cache_write_5m": 3.75,
        "cache_write_1h": 6,
    },
}


@contextmanager
def set_up(
    agent: Agent, tmp_path: Path, overrides: Mapping[str, Any] | None = None
) -> Iterator[Setup]:
    """``agent`` pointed at a proxy in front of the stand-in, the proxy's policy the
    default with ``overrides`` (dotted keys, as ``CHATCLI_*`` variables); skips when the
    agent is not installed. Every request the stand-in received is checked, at the end, to
    be one the provider would accept."""
    why = missing(agent.cli)
    if why is not None:
        pytest.skip(why)
    provider = Provider(script=scripted(agent.tools, agent.fmt), cache=PromptCache())
    home, project, spill = tmp_path / "home", tmp_path / "project", tmp_path / "spill"
    for folder in (home, project):
        folder.mkdir()
    log = tmp_path / "serve.log"
    policy = {"spill.root": str(spill), **PRICED, **(overrides or {})}
    with serving(provider.app()) as upstream, serve_process(upstream, policy, log=log) as url:
        env = agent.configure(home, project, url)
        setup = Setup(agent, provider, url, log, spill, project, env, upstream)
        try:
            yield setup
        finally:
            setup.stop()
    assert not provider.refused, [reason for _, reason, _ in provider.refused]


def readbacks_counted(setup: Setup) -> dict[tuple[str, str, str], float]:
    """The read-backs ``/metrics`` counts, by kind, step and tool."""
    text = httpx.get(setup.url + "/metrics", timeout=30).text
    return {
        (sample.labels["kind"], sample.labels["step"], sample.labels["tool"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "chatcli_proxy_readbacks_total"
    }
