"""Real recorded requests, with oversized and non-ASCII results injected, keep the
product's promises under every shipped policy: the input is untouched, the output passes
the provider's pairing rules, processing it again changes nothing, and every character cut
is in the spill file the new text names (issue 13, item 2: idempotency failed on 3-5% of
such requests).

Reads ../shared/data/trajectories when it is beside the checkout (it is in CI); the
sessions are data, never copied into the repository.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from locations import TRAJECTORIES

import middleware
from middleware.replay.transcripts import load_transcripts

SOURCES = [
    "claude-code/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl",
    "claude-code/subagent.jsonl",
    "claude-code/tool_heavy.jsonl",
    "tau-bench/gpt-4o-airline.json",
]
POLICIES = [None, "preset:claude-code", "preset:hermes", "preset:pi", "preset:ethos"]

if not TRAJECTORIES.is_dir():  # pragma: no cover - CI always has the shared data
    pytest.skip("../shared/data/trajectories is not beside the checkout", allow_module_level=True)


def requests(source: str, count: int) -> list[tuple[str, list[Any]]]:
    """``count`` requests spread over each of the source's first four sessions."""
    transcripts = load_transcripts(TRAJECTORIES / source)[:4]
    picked = []
    for transcript in transcripts:
        found = list(transcript.requests())
        step = max(len(found) // count, 1)
        picked += [(transcript.format, r) for r in found[step - 1 :: step][:count]]
    return picked


def inject(messages: list[Any], rng: random.Random) -> list[Any]:
    """Make one tool result 2 MB and another non-ASCII, wherever the request has them."""
    out = copy.deepcopy(messages)
    slots = []
    for message in out:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(message, dict) and message.get("role") == "tool":
            slots.append((message, "content"))
        elif isinstance(content, list):
            slots += [
                (b, "content")
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool_result"
            ]
    rng.shuffle(slots)
    for (holder, key), text in zip(
        slots, ["ligne é — ü\n" * 180_000, "日本語の出力 ✓\n" * 4_000], strict=False
    ):
        holder[key] = text
    return out


CASES = [(source, i) for source in SOURCES for i in range(len(POLICIES))]


@pytest.mark.parametrize(("source", "policy_index"), CASES)
def test_real_requests_keep_every_promise(source: str, policy_index: int) -> None:
    policy = POLICIES[policy_index]
    rng = random.Random(f"{source}:{policy_index}")
    with middleware.Pipeline.from_policy(policy) as pipe:
        for fmt, messages in requests(source, 12):
            request = inject(messages, rng)
            before = copy.deepcopy(request)
            result = pipe.process(request, format=fmt)
            assert request == before, "the input was mutated"
            assert middleware.check_history(result.messages, fmt) == []
            again = pipe.process(result.messages, format=fmt)
            assert again.messages == result.messages, [a.kind for a in again.report.actions]
            for action in result.report.actions:
                path = action.detail.get("path")
                if path is not None and action.kind in ("spilled", "summarized", "truncated"):
                    assert pipe.spill.load(path) is not None
