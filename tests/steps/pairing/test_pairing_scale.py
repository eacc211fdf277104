"""Pairing repair, the view's index and check_history() stay near-linear on adversarial
histories. No timing assertion: each case runs in a subprocess under a generous limit of
CPU time that a quadratic regression would blow (real timings:
``benchmarks/pairing_faults.py``)."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.locations import REPO

#: Slow (seconds each): `-m "not slow"` leaves it out of a quick run.
pytestmark = pytest.mark.slow

#: Builds the adversarial histories; shared with the benchmark.
BUILD = """
from benchmarks.pairing_faults import idless_calls, parallel_calls, reused_id, user_run
"""

RUN_PAIRING = """
import middleware
from middleware.plugin.host import PluginHost
host = PluginHost.create(load_entrypoints=False, builtins=("middleware.steps.pairing",))
with middleware.Pipeline.from_policy(None, host=host) as pipe:
    out = pipe.process(messages, format=fmt).messages
assert middleware.check_history(out, fmt) == [], "repair left violations"
"""

RUN_DEFAULT = """
import middleware
policy = middleware.load_policy(
    None, env={}, dotenv_path=False, overrides={"budget.enabled": False}
)
with middleware.Pipeline(policy) as pipe:
    out = pipe.process(messages, format=fmt).messages
assert middleware.check_history(out, fmt) == [], "repair left violations"
"""

RUN_CHECK = """
import middleware
assert middleware.check_history(messages, fmt)
"""


#: CPU seconds a case may use: a quadratic regression needs far more, and unlike the time
#: on the clock, the CPU time is not stretched by other work on the machine (the suite's
#: other worker included).
CPU_SECONDS = 60


def limit_cpu() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS + 5))


def run(setup: str, body: str) -> None:
    script = textwrap.dedent(BUILD) + textwrap.dedent(setup) + textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        timeout=30 * CPU_SECONDS,
        capture_output=True,
        check=False,
        preexec_fn=limit_cpu,
    )
    if done.returncode == -signal.SIGXCPU:
        pytest.fail(f"over {CPU_SECONDS} s of CPU: near-linear no more")
    if done.returncode != 0:
        pytest.fail(done.stderr.decode(errors="replace")[-2000:])


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "responses"])
def test_one_id_reused_across_50_000_messages(fmt: str) -> None:
    # Anthropic renames every repeat: the search for a free "<id>__N" restarted at N = 2.
    run(f"fmt = {fmt!r}\nmessages = reused_id(50_000, fmt)\n", RUN_PAIRING)


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "responses"])
def test_one_message_with_50_000_idless_calls(fmt: str) -> None:
    # Every synthetic result looked for its call among all the calls of the turn.
    run(f"fmt = {fmt!r}\nmessages = idless_calls(50_000, fmt)\n", RUN_DEFAULT)


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "responses"])
def test_50_000_answered_calls_in_one_turn(fmt: str) -> None:
    run(f"fmt = {fmt!r}\nmessages = parallel_calls(50_000, fmt)\n", RUN_DEFAULT)


def test_check_history_on_50_000_user_messages_in_a_row() -> None:
    # Every user message scanned back to the latest assistant message.
    run("fmt = 'anthropic'\nmessages = user_run(50_000)\n", RUN_CHECK)
