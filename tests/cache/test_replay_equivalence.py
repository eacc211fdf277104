"""Replaying real sessions request by request gives byte-identical requests and reports
with the cache on and off, in one process and in another (issue 16, item 4): reused work,
and requests worked on in their new part only, never change what is sent.

Reads ../shared/data/trajectories when it is beside the checkout (it is in CI).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from locations import REPO, TRAJECTORIES  # noqa: E402
from session_builders import with_cache_marker  # noqa: E402

#: (file, transcript number, policy): a long Claude Code session under the default policy
#: and under ChatCLI's every-turn compaction, a text-protocol agent, an OpenAI Chat agent.
CASES = [
    ("claude-code/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl", 1, None),
    ("claude-code/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl", 1, "preset:chatcli"),
    ("mini-swe-agent/trajs/django__django-10973/django__django-10973.traj.json", 0, None),
    ("tau-bench/gpt-4o-airline.json", 0, "preset:claude-code"),
]


def replay(
    source: str,
    number: int,
    policy_name: str | None,
    root: str,
    cache: bool,
    *,
    marked: bool = False,
) -> list[str]:
    """The SHA-256 of every request the session sends after ``process()``, and of its
    report, in order. ``marked``: with a cache marker on the last message of each request,
    moved forward every time (as Claude Code does), so the previous request's last message
    comes back changed."""
    import middleware
    from middleware.cache import DerivedCache
    from middleware.replay.transcripts import load_transcripts

    transcript = load_transcripts(TRAJECTORIES / source)[number]
    overrides = {**transcript.policy_overrides, "spill": {"root": root, "keep": True}}
    policy = middleware.load_policy(policy_name, env={}, dotenv_path=False, overrides=overrides)
    digests = []
    kwargs = {} if cache else {"cache": DerivedCache(0)}
    with middleware.Pipeline(policy, session_id="replay", **kwargs) as pipe:
        for sent in transcript.requests():
            request = with_cache_marker(sent) if marked else sent
            result = pipe.process(request, format=transcript.format)
            wire = json.dumps(result.output, ensure_ascii=False) + result.report.to_json()
            digests.append(hashlib.sha256(wire.encode("utf-8", "surrogatepass")).hexdigest())
        if cache and transcript.format == "anthropic" and policy_name is None:
            # Most requests continue the previous one (middleware.session.resume).
            assert pipe.continued > len(digests) // 2
    return digests


@pytest.mark.skipif(not TRAJECTORIES.is_dir(), reason="no shared trajectories beside the checkout")
def test_a_cache_marker_moved_forward_changes_nothing(tmp_path: Path) -> None:
    source, number = CASES[0][:2]
    root = str(tmp_path)
    without = replay(source, number, None, root, cache=False, marked=True)
    assert replay(source, number, None, root, cache=True, marked=True) == without


@pytest.mark.skipif(not TRAJECTORIES.is_dir(), reason="no shared trajectories beside the checkout")
@pytest.mark.parametrize(("source", "number", "policy"), CASES)
def test_every_request_is_the_same_with_and_without_the_cache(
    source: str, number: int, policy: str | None, tmp_path: Path
) -> None:
    root = str(tmp_path)
    without = replay(source, number, policy, root, cache=False)
    with_cache = replay(source, number, policy, root, cache=True)
    assert with_cache == without
    other = subprocess.run(
        [sys.executable, __file__, source, str(number), policy or "", root],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    assert json.loads(other.stdout) == without


if __name__ == "__main__":  # the other process
    source, number, policy, root = sys.argv[1:5]
    print(json.dumps(replay(source, int(number), policy or None, root, cache=True)))
