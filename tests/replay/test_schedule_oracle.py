"""benchmarks/schedule_oracle.py: its dynamic programme finds the cheapest non-decreasing
sequence of boundaries (checked against every sequence on a short session), which is never
dearer than the schedule's own or than compacting nothing."""

from __future__ import annotations

import itertools
import tempfile
from typing import Any

import middleware
from benchmarks.schedule_oracle import Request, charge, forced_boundary, replay
from middleware.replay.costs import PRICING
from middleware.replay.transcripts import Transcript

PRICES = PRICING["anthropic-5m"]


def session(turns: int) -> Transcript:
    messages: list[Any] = [{"role": "user", "content": "look around"}]
    for i in range(turns):
        body = f"report_{i}.txt\n" + "the quick brown fox jumps over the lazy dog\n" * 40

        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Step {i}."},
            {"type": "tool_use", "id": f"toolu_{i}", "name": "Grep", "input": {"pattern": f"v{i}"}},
        ]})  # fmt: skip
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": body},
        ]})  # fmt: skip
    messages.append({"role": "assistant", "content": "done"})
    return Transcript("synthetic", "json", "anthropic", messages)


def brute_force(transcript: Transcript) -> float:
    """The cheapest cost over every non-decreasing boundary sequence, enumerated."""
    requests = list(transcript.requests())
    with tempfile.TemporaryDirectory() as root:
        overrides = {"spill.url": None, "spill.root": root}
        policy = middleware.load_policy(None, env={}, dotenv_path=False, overrides=overrides)
        with middleware.Pipeline(policy, session_id="oracle") as pipe, forced_boundary() as force:
            texts: dict[tuple[int, int], Request] = {}
            for k, history in enumerate(requests):
                for boundary in range(k + 2):
                    force[0] = boundary
                    texts[k, boundary] = Request(pipe.process(history, format="anthropic").messages)
    best = float("inf")
    for sequence in itertools.product(*(range(k + 2) for k in range(len(requests)))):
        if any(a > b for a, b in itertools.pairwise(sequence)):
            continue
        total, before = 0.0, None
        for k, boundary in enumerate(sequence):
            request = texts[k, boundary]
            total += charge(PRICES, request, before)
            before = request
        best = min(best, total)
    return best


def test_the_oracle_is_the_cheapest_sequence_of_boundaries() -> None:
    transcript = session(5)
    raw, scheduled, oracle = replay(transcript, None, PRICES)
    assert oracle < raw  # compaction pays on this session, so the boundaries matter
    assert abs(oracle - brute_force(transcript)) < 1e-6
    assert oracle <= scheduled + 1e-6 and oracle <= raw + 1e-6


def test_a_prefix_shared_with_the_previous_request_is_charged_as_read() -> None:
    first = Request([{"role": "user", "content": "a" * 400}])
    second = Request([{"role": "user", "content": "a" * 400}, {"role": "user", "content": "b"}])
    assert second.shared(first) >= 400
    assert charge(PRICES, second, first) < charge(PRICES, second, None)


def test_the_default_pays_for_no_rewrite_a_short_session_ends_before_paying_back() -> None:
    """A session of five or six turns of mid-size results: a schedule that expected ten more
    turns compacted them in the last request, 1.20 and 1.14 of no middleware."""
    for turns in (5, 6):
        raw, scheduled, _ = replay(session(turns), None, PRICES)
        assert scheduled <= raw
