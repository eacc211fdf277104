"""The object store on fsspec filesystems other than S3: a URL fsspec knows works the same
way, and a filesystem without atomic writes gets a temporary name and a move."""

from __future__ import annotations

from pathlib import Path

import pytest

from middleware import load_policy
from middleware.policy.settings import bind
from middleware.spill import SpillSettings, SpillWorkspace, open_root, open_store
from middleware.spill.objects import ObjectRoot, ObjectWorkspace
from middleware.spill.retention import collect

fsspec = pytest.importorskip("fsspec", reason="needs the [s3] extra (fsspec)")


def spill_settings(url: str) -> SpillSettings:
    return bind(load_policy(None, overrides={"spill.url": url}, dotenv_path=False), SpillSettings)


def test_any_fsspec_url_is_an_object_store() -> None:
    spill = spill_settings("memory://spill-tests/any")
    store = open_store("m", spill)
    assert isinstance(store, ObjectWorkspace)
    location = store.save("k", "in memory")
    assert location.startswith("memory:///spill-tests/any/chatcli-agent-m/tool-results/k-")
    assert store.load(location) == "in memory"
    assert [f.name for f in open_root(spill).sessions()] == ["chatcli-agent-m"]
    assert [f.name for f in collect(open_root(spill), 60, now=10**10).removed] == [
        "chatcli-agent-m"
    ]
    assert fsspec.filesystem("memory").find("spill-tests/any") == []


@pytest.mark.parametrize("url", ["{tmp}", "file://{tmp}"])
def test_a_path_or_file_url_is_the_local_workspace(tmp_path: Path, url: str) -> None:
    store = open_store("l", spill_settings(url.format(tmp=tmp_path)))
    assert isinstance(store, SpillWorkspace)
    assert Path(store.save("k", "local")).parent == tmp_path / "chatcli-agent-l" / "tool-results"


def test_without_atomic_writes_a_result_is_moved_into_place(tmp_path: Path) -> None:
    local = fsspec.filesystem("file")
    store = ObjectRoot(local, str(tmp_path), retry_after=0).workspace("w")
    location = store.save("k", "moved whole")
    results = tmp_path / "chatcli-agent-w" / "tool-results"
    assert [p.name for p in results.iterdir()] == [location.rsplit("/", 1)[1]]
    assert store.load(location) == "moved whole"


def test_a_failed_move_leaves_no_partial_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = fsspec.filesystem("file")

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError("read-only")

    monkeypatch.setattr(local, "mv", refuse)
    store = ObjectRoot(local, str(tmp_path), retry_after=0).workspace("w")
    with pytest.raises(OSError, match="read-only"):
        store.save("k", "never whole")
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []  # no partial object left
