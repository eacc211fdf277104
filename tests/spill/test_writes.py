"""Spill writes are paid once per text (issue 16, item 2): a warm request writes nothing it
wrote before, a pipeline started on a filled folder (a restart, another replica) rewrites
nothing, and a request with one new oversized result writes one file for it (and keeps
one reading of it: its preview's outline, ``middleware.cache.kept``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from locations import TRAJECTORIES

import middleware
from middleware.replay.transcripts import load_transcripts
from middleware.spill.layout import RECORD

SESSION = "claude-code/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"

pytestmark = pytest.mark.skipif(not TRAJECTORIES.is_dir(), reason="no shared trajectories")


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths every spill write renamed into place, in order (not the session's
    record, which a closing pipeline writes: when its last request was sent)."""
    done: list[str] = []
    real: Callable[..., Any] = os.replace

    def counting(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if Path(dst).name != RECORD:
            done.append(str(dst))
        real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", counting)
    return done


def pipeline(root: Path, **overrides: Any) -> middleware.Pipeline:
    overrides = {"spill": {"root": str(root), "keep": True}, **overrides}
    policy = middleware.load_policy(None, env={}, dotenv_path=False, overrides=overrides)
    return middleware.Pipeline(policy, session_id="writes")


def test_each_spilled_text_is_written_once(tmp_path: Path, writes: list[str]) -> None:
    requests = list(load_transcripts(TRAJECTORIES / SESSION)[1].requests())
    with pipeline(tmp_path) as pipe:
        for request in requests:
            pipe.process(request)
        assert writes, "the session spills and compacts: it must write files"
        assert len(writes) == len(set(writes))
        written = len(writes)
        pipe.process(requests[-1])  # warm: the same request again
        assert len(writes) == written
    with pipeline(tmp_path) as restarted:  # a fresh pipeline on the same folder
        restarted.process(requests[-1])
    assert len(writes) == written


def test_a_new_oversized_result_costs_one_write(tmp_path: Path, writes: list[str]) -> None:
    requests = list(load_transcripts(TRAJECTORIES / SESSION)[1].requests())
    last = requests[-1]
    # Compaction off: the two turns added would also move its boundary (more writes, each
    # for a result compacted for the first time).
    with pipeline(tmp_path, microcompact={"enabled": False}) as pipe:
        pipe.process(last)
        before = len(writes)
        call = {"type": "tool_use", "id": "toolu_new", "name": "Bash", "input": {"command": "x"}}
        result = {"type": "tool_result", "tool_use_id": "toolu_new", "content": "y\n" * 60_000}
        grown = [
            *last,
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ]
        if last[-1]["role"] == "user":  # keep the roles alternating
            grown.insert(len(last), {"role": "assistant", "content": "ok"})
            grown.insert(len(last) + 1, {"role": "user", "content": "go on"})
        pipe.process(grown)
        new = writes[before:]
        spilled = [path for path in new if "/tool-results/" in path]
        assert len(spilled) == 1
        assert "toolu_new" in spilled[0]
        assert [Path(path).name.split("-")[0] for path in new if path not in spilled] == ["outline"]
