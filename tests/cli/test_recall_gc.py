"""``chatcli-mw recall`` and ``gc``, run as the console script: a spilled output read back
by the key its preview names, from a local or an S3 store; idle sessions removed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from object_store import CREDENTIALS, S3Server

from middleware.spill import SpillWorkspace

SCRIPT = Path(sys.executable).parent / "chatcli-mw"
OUTPUT = "".join(f"line {n}\n" for n in range(1, 501))


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"), **env},
    )


def test_recall_a_local_path_whole_and_by_lines(tmp_path: Path) -> None:
    path = SpillWorkspace("s1", tmp_path).save("toolu_01", OUTPUT)
    whole = run("recall", path)
    assert whole.returncode == 0 and whole.stdout == OUTPUT and whole.stderr == ""
    part = run("recall", path, "--offset", "101", "--limit", "3")
    assert part.stdout == "line 101\nline 102\nline 103\n"
    assert part.stderr == "chatcli-mw: lines 101-103 of 500; --offset 104 for more\n"
    tail = run("recall", path, "--offset", "499")
    assert tail.stdout == "line 499\nline 500\n"
    assert tail.stderr == "chatcli-mw: lines 499-500 of 500\n"
    past = run("recall", path, "--offset", "501")
    assert past.returncode == 2 and "past the end" in past.stderr and "500 lines" in past.stderr


def test_recall_session_and_name_in_the_policy_store(tmp_path: Path) -> None:
    name = Path(SpillWorkspace("s2", tmp_path).save("call_1", OUTPUT)).name
    done = run("recall", f"s2/{name}", "--limit", "1", CHATCLI_SPILL__ROOT=str(tmp_path))
    assert done.returncode == 0 and done.stdout == "line 1\n"


@pytest.mark.parametrize(
    "key",
    [
        "/etc/passwd",
        "s2/../../../etc/passwd",
        "{root}/chatcli-agent-s2/tool-results/../../secret.txt",
        "{root}/chatcli-agent-s2/tool-results/forged-0123456789abcdef.txt",
        "s3://bucket/not/the/layout.txt",
    ],
)
def test_recall_refuses_anything_a_store_did_not_save(tmp_path: Path, key: str) -> None:
    SpillWorkspace("s2", tmp_path).save("call_1", OUTPUT)
    (tmp_path / "secret.txt").write_text("TOP SECRET CONTENT", encoding="utf-8")
    forged = tmp_path / "chatcli-agent-s2" / "tool-results" / "forged-0123456789abcdef.txt"
    forged.write_text("not what the digest says", encoding="utf-8")
    done = run("recall", key.format(root=tmp_path), CHATCLI_SPILL__ROOT=str(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("chatcli-mw: error: ") and "CONTENT" not in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_recall_from_s3_in_another_process(s3: S3Server, bucket: str) -> None:
    from middleware import Pipeline, load_policy

    policy = load_policy(None, overrides=s3.policy(f"s3://{bucket}/mw"), dotenv_path=False)
    with Pipeline(policy, session_id="remote") as pipe:
        location = pipe.spill.save("call_7", OUTPUT)
    env = {**CREDENTIALS, "AWS_ENDPOINT_URL": s3.endpoint}
    done = run("recall", location, "--offset", "2", "--limit", "2", **env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "line 2\nline 3\n"
    short = f"remote/{location.rsplit('/', 1)[1]}"
    by_session = run("recall", short, CHATCLI_SPILL__URL=f"s3://{bucket}/mw", **env)
    assert by_session.stdout == OUTPUT
    other = run("recall", location.replace("chatcli-agent-remote", "chatcli-agent-x"), **env)
    assert other.returncode == 2 and "no spilled output" in other.stderr


def test_gc_removes_only_idle_workspaces_and_only_ours(tmp_path: Path) -> None:
    old = SpillWorkspace("old", tmp_path, keep=True)
    old.save("c", OUTPUT)
    old.close()
    fresh = SpillWorkspace("fresh", tmp_path, keep=True)
    fresh.save("c", OUTPUT)
    fresh.close()
    held = SpillWorkspace("held", tmp_path)
    held.save("c", OUTPUT)  # open: this process holds a lease in it
    foreign = tmp_path / "chatcli-agent-foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("not ours", encoding="utf-8")
    week_ago = time.time() - 8 * 86400
    for folder in ("chatcli-agent-old", "chatcli-agent-held", "chatcli-agent-foreign"):
        for path in [tmp_path / folder, *(tmp_path / folder).rglob("*")]:
            os.utime(path, (week_ago, week_ago), follow_symlinks=False)
    env = {"CHATCLI_SPILL__ROOT": str(tmp_path)}
    dry = run("gc", "--older-than", "7d", "--dry-run", **env)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith(f"would remove {tmp_path}/chatcli-agent-old: 1 results, 4.4 KB")
    assert len(dry.stdout.splitlines()) == 1
    assert (tmp_path / "chatcli-agent-old").exists()
    done = run("gc", "--older-than", "7d", **env)
    assert done.stdout.startswith(f"removed {tmp_path}/chatcli-agent-old:")
    assert "removed 1 sessions (4.4 KB) idle for more than 7d" in done.stderr
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["chatcli-agent-foreign", "chatcli-agent-fresh", "chatcli-agent-held"]
    held.close()


@pytest.mark.parametrize(
    ("age", "message"),
    [
        ("7 days", "not an age: write a number and a unit"),
        ("30m", "not longer than proxy.session_idle_seconds (3600 s)"),
    ],
)
def test_gc_refuses_a_bad_or_too_short_age(tmp_path: Path, age: str, message: str) -> None:
    done = run("gc", "--older-than", age, CHATCLI_SPILL__ROOT=str(tmp_path))
    assert done.returncode == 2 and message in done.stderr


def test_recall_from_a_store_that_is_down_says_so() -> None:
    from servers import free_port

    env = {**CREDENTIALS, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}  # nobody
    key = "s3://bucket/mw/chatcli-agent-s/tool-results/call_7-0123456789abcdef.txt"
    done = run("recall", key, **env)
    assert done.returncode == 2
    assert done.stderr.startswith(f"chatcli-mw: error: cannot read {key}: EndpointConnectionError")
    assert "check spill.url and the store's credentials" in done.stderr
