"""A short soak of ``chatcli-mw serve`` (``tests/soak_stack.py``; ``benchmarks/soak.py`` runs
the full one): 24 agents in growing conversations, a quarter of them slow to send and to
read, for 30 s, while the object store they spill to hangs for 8 s of them. Every request
is answered with a 200 within its deadline (the store's is 2 s here), and memory stays flat
once the conversations have grown (they start under way) and the shared cache is full (a
small one, 16 MiB, full within 7 s) (issue 26)."""

from __future__ import annotations

import pytest
from soak_stack import Plan, soak

#: It times a real wait: it runs in the suite's "timing" group, never beside another such
#: test (pyproject.toml's addopts).
pytestmark = [pytest.mark.xdist_group("timing"), pytest.mark.slow]


def test_agents_are_answered_in_time_while_the_store_hangs_and_memory_stays_flat() -> None:
    plan = Plan(
        conversations=24,
        seconds=30,
        hang_at=8,
        hang_for=8,
        slow=0.25,
        settled_after=14,
        overrides=(
            ("spill.timeout_seconds", 2),
            ("cache.max_bytes", 16 * 2**20),
            ("proxy.session_memory_bytes", 16 * 2**20),
        ),
        deadline=20,
        max_messages=40,
        think=(0.2, 1.5),
        large_every=4,
        join_within=3,
    )
    lines: list[str] = []
    outcome = soak(plan, echo=lines.append)
    report = "\n".join(lines)
    assert outcome.tally.latencies, report
    assert not outcome.tally.failures, report
    assert not outcome.tally.late, report
    assert outcome.tally.during_hang, report  # requests did meet the hanging store
    assert outcome.flat, report
    assert not outcome.uncleaned, report
