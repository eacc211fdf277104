"""Auto mode on the recorded sessions: every request of every mini-swe-agent and SWE-agent
text-mode run comes out byte-identical to what the explicit setting gives, and processing
that output again changes nothing; every request of the Claude Code, tau-bench and
SWE-agent function-calling runs comes out as with the text protocol off.

Reads ../shared/data/trajectories when it is beside the checkout; the sessions are data,
never copied into the repository.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from locations import TRAJECTORIES

from middleware.pipeline import Pipeline
from middleware.plugin.host import PluginHost
from middleware.policy import Policy, load_policy
from middleware.replay.transcripts import (
    MINI_SWE_AGENT_RULE,
    SWE_AGENT_TEXT_RULE,
    Transcript,
    load_transcripts,
)

if not TRAJECTORIES.is_dir():  # pragma: no cover - CI always has the shared data
    pytest.skip("../shared/data/trajectories is not beside the checkout", allow_module_level=True)


def files(folder: str, pattern: str) -> list[str]:
    return sorted(str(p.relative_to(TRAJECTORIES)) for p in (TRAJECTORIES / folder).rglob(pattern))


MINI = files("mini-swe-agent", "*.traj.json")
SWE = files("swe-agent", "*.traj")
OTHERS = [*files("claude-code", "*.jsonl"), "tau-bench/gpt-4o-airline.json"]


def uses_tools(transcript: Transcript) -> bool:
    return any(m.get("role") == "tool" or m.get("tool_calls") for m in transcript.messages)


@functools.cache
def policy(spill: Path, explicit: str = "{}") -> Policy:
    """Loaded once per test (a test has one spill folder), not once per session:
    tau-bench's file holds 200 of them."""
    overrides = {**json.loads(explicit), "spill.root": str(spill)}
    return load_policy(None, env={}, dotenv_path=False, overrides=overrides)


#: One plugin host for every pipeline, as the proxy has.
HOST = PluginHost.create()


def wire(messages: list[Any]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def compare(transcript: Transcript, explicit: Mapping[str, Any], spill: Path) -> list[str]:
    """Process every request under auto and under ``explicit`` (one session id, one spill
    root, so spill paths compare equal); auto's output, when it recognised a text agent, is
    processed again and recognised again. Returns the
    auto reports' ``text_protocol`` per request."""
    seen = []
    with (
        Pipeline(policy(spill), host=HOST, session_id="s") as auto,
        Pipeline(
            policy(spill, json.dumps(explicit, sort_keys=True)), host=HOST, session_id="s"
        ) as reference,
    ):
        for k, request in enumerate(transcript.requests()):
            result = auto.process(request, format=transcript.format)
            expected = reference.process(request, format=transcript.format)
            assert wire(result.messages) == wire(expected.messages), (transcript.name, k)
            if result.report.text_protocol is not None:  # the idempotency tests cover the rest
                again = auto.process(result.output, format=transcript.format)
                assert wire(again.messages) == wire(result.messages), (transcript.name, k)
                assert again.report.text_protocol == result.report.text_protocol
            seen.append(result.report.text_protocol)
    return seen


@pytest.mark.parametrize("source", MINI + SWE)
def test_text_agents_get_the_treatment_of_the_explicit_setting(source: str, tmp_path: Path) -> None:
    (transcript,) = load_transcripts(TRAJECTORIES / source)
    if uses_tools(transcript):  # SWE-agent's function-calling runs: never text protocol
        assert set(compare(transcript, {"text_protocol.enabled": False}, tmp_path)) == {None}
        return
    explicit = MINI_SWE_AGENT_RULE if transcript.source == "mini-swe-agent" else SWE_AGENT_TEXT_RULE
    seen = compare(transcript, explicit, tmp_path)
    # Recognised from the request carrying its first observation on, never lost after.
    agent = "mini-swe-agent" if transcript.source == "mini-swe-agent" else "SWE-agent"
    assert seen[:1] == [None] and all(s and agent in s for s in seen[1:]), seen


@pytest.mark.parametrize("source", OTHERS)
def test_agents_with_structured_tools_are_never_mistaken(source: str, tmp_path: Path) -> None:
    for transcript in load_transcripts(TRAJECTORIES / source):
        seen = compare(transcript, {"text_protocol.enabled": False}, tmp_path)
        assert set(seen) <= {None}, transcript.name
