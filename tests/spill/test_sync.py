"""Spilled files are synced to disk together, in parallel, before ``process()`` returns
the previews that name them, instead of one ``fsync`` after another as they are written."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware.errors import MiddlewareError
from middleware.spill import syncing, workspace


def big_turn(count: int) -> list[dict[str, Any]]:
    calls = [{"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {}} for i in range(count)]
    results = [
        {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"{i} row\n" * 20_000}
        for i in range(count)
    ]
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": calls},
        {"role": "user", "content": results},
    ]


def policy(root: Path) -> middleware.Policy:
    return middleware.load_policy(env={}, dotenv_path=False, overrides={"spill.root": str(root)})


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, str]]:
    """Each path synced, with the thread that synced it."""
    seen: list[tuple[Path, str]] = []
    real = syncing.sync_file

    def record(path: Path, *, directory: bool = False) -> None:
        seen.append((path, threading.current_thread().name))
        real(path, directory=directory)

    monkeypatch.setattr(syncing, "sync_file", record)
    return seen


def test_every_spilled_file_is_synced_before_process_returns(
    tmp_path: Path, synced: list[tuple[Path, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    fsyncs_while_saving: list[int] = []
    save = workspace.SpillWorkspace.save

    def counted_save(self: workspace.SpillWorkspace, *args: Any, **kwargs: Any) -> str:
        before = len(synced)
        location = save(self, *args, **kwargs)
        fsyncs_while_saving.append(len(synced) - before)
        return location

    monkeypatch.setattr(workspace.SpillWorkspace, "save", counted_save)
    with middleware.Pipeline.from_policy(policy(tmp_path), session_id="s") as pipe:
        result = pipe.process(big_turn(6))
        files = sorted((tmp_path / "chatcli-agent-s" / "tool-results").iterdir())
        paths = [Path(a.detail["path"]) for a in result.report.actions if "path" in a.detail]
        assert len(files) >= 6 and set(paths) <= set(files)
        assert set(fsyncs_while_saving) == {0}  # nothing synced one by one
        synced_files = sorted(p for p, _ in synced if p.is_file())
        assert synced_files == files  # each once, before process() returned
        assert (tmp_path / "chatcli-agent-s" / "tool-results") in [p for p, _ in synced]
        assert {name for p, name in synced if p.is_file()} != {threading.current_thread().name}
        count = len(synced)
        pipe.process(big_turn(6))  # the same files: nothing new to sync
        assert len(synced) == count


def test_a_file_the_disk_refuses_to_sync_fails_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(path: Path, *, directory: bool = False) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(syncing, "sync_file", refuse)
    with (
        middleware.Pipeline.from_policy(policy(tmp_path)) as pipe,
        pytest.raises(MiddlewareError, match="cannot sync spilled output"),
    ):
        pipe.process(big_turn(2))
