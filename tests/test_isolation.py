"""Every test has a temporary folder of its own as the system's (tests/conftest.py), so
tests that use one session id on the default spill folder never meet each other's files,
whether they run one after the other in a worker or side by side in two (issue 37, item 4:
fixed session ids on the shared default folder collided)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import parallel
import pytest
import servers
from locations import EXAMPLES, TESTS


@pytest.mark.parametrize("run", ["first", "second"])
def test_a_fixed_session_id_on_the_default_spill_folder_starts_empty(run: str) -> None:
    """The command keeps what it spilled (for the agent to read back), so without a folder
    of its own the second run would find the first's."""
    folder = Path(tempfile.gettempdir()) / "chatcli-agent-fixed"
    assert not folder.exists(), f"the {run} run found another test's spill folder"
    example = str(EXAMPLES / "anthropic-interrupted.json")
    command = [sys.executable, "-m", "middleware", "process", example, "--session", "fixed"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    assert f"full outputs kept in: {folder / 'tool-results'}" in done.stderr
    assert list((folder / "tool-results").iterdir())


def test_tests_of_one_xdist_group_run_on_one_worker(tmp_path: Path) -> None:
    """The tests that time a real wait share the group "timing" so that none runs beside
    another; pytest-xdist's ``--dist loadgroup`` silently stopped honouring the groups on
    pytest 9.2 (pytest-dev/pytest-xdist#1386: the tests were spread as if unmarked), which
    is why the development extra keeps pytest below it."""
    for module in ("a", "b"):
        tests = "".join(f"def test_{n}() -> None:\n    pass\n" for n in range(4))
        marked = f"import pytest\n\npytestmark = pytest.mark.xdist_group('timing')\n\n{tests}"
        (tmp_path / f"test_{module}.py").write_text(marked, "utf-8")
    command = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
               "-p", "no:cacheprovider", "-p", "no:langsmith_plugin", "-p", "no:hypothesispytest",
               "-p", "no:anyio", "-c", "/dev/null",
               "--rootdir", str(tmp_path), str(tmp_path)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    ran = [line for line in done.stdout.splitlines() if " PASSED " in line]
    assert done.returncode == 0 and len(ran) == 8, done.stdout[-2000:]
    assert len({line.split()[0] for line in ran}) == 1, "\n".join(ran)  # "[gw0]" or "[gw1]"


def test_auto_gives_a_worker_per_core_and_one_for_the_timing_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    assert parallel.auto_workers() == parallel.cores() + 1
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "5")
    assert parallel.auto_workers() is None  # pytest-xdist reads the variable itself


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="finds the workers in /proc")
def test_the_worker_of_the_timing_group_has_the_other_workers_yield_to_it() -> None:
    """Two children of one process, as two workers are of the controller: when one starts
    the timing tests, the other's priority drops; its own does not."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        script = "import os, parallel; parallel.give_way_to_timing(); print(os.nice(0))"
        env = {**os.environ, "PYTEST_XDIST_WORKER": "gw9", "PYTHONPATH": str(TESTS)}
        done = subprocess.run(
            [sys.executable, "-c", script],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert int(done.stdout) == os.nice(0)
        assert os.getpriority(os.PRIO_PROCESS, other.pid) == parallel.YIELDING
    finally:
        other.kill()
        other.wait()


def test_a_socket_a_test_leaks_fails_that_test_not_a_later_one(tmp_path: Path) -> None:
    """The suite's conftest collects each test's garbage as it ends: a leak surfaces where
    it was made (it surfaced in unrelated tests, whenever the collector ran)."""
    leaky = (
        "import socket\n\n\ndef test_leaks() -> None:\n"
        "    sock = socket.socket()\n    cycle = [sock]\n    cycle.append(cycle)\n\n\n"
        "def test_after() -> None:\n    pass\n"
    )
    (tmp_path / "test_leaky.py").write_text(leaky, "utf-8")
    command = [sys.executable, "-m", "pytest", "-n", "0", "-p", "conftest",
               "-p", "no:cacheprovider", "-p", "no:langsmith_plugin", "-c", "/dev/null",
               "-o", f"pythonpath={TESTS}", "-W", "error", "--rootdir", str(tmp_path),
               str(tmp_path)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert "ERROR at teardown of test_leaks" in done.stdout, done.stdout[-3000:]
    assert "1 error" in done.stdout and "2 passed" in done.stdout, done.stdout[-3000:]


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_each_worker_hands_out_ports_no_other_worker_or_outgoing_connection_takes(
    workers: int,
) -> None:
    """A server in a process of its own binds the port :func:`servers.free_port` found:
    in between, the port must not be one another worker may pick, nor one the kernel gives
    an outgoing connection (CI lost a proxy's start to "address already in use")."""
    shares = [set(servers.port_share(f"gw{n}", workers)) for n in range(workers)]
    assert all(len(share) >= 1000 for share in shares)
    assert sum(map(len, shares)) == len(set().union(*shares))
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert max(servers.PORTS) < low or min(servers.PORTS) > high


def test_no_property_is_timed() -> None:
    """Every hypothesis test runs without a deadline (tests/conftest.py's profile), so a busy
    machine cannot fail one: a test with its own ``@settings`` keeps the profile's."""
    from hypothesis import given, settings, strategies

    assert settings.default.deadline is None

    @settings(max_examples=1)
    @given(strategies.none())
    def slow(_: None) -> None:
        import time

        time.sleep(0.25)  # past hypothesis's own default deadline of 200 ms

    slow()
