"""The spill workspace: lossless, write-once, private, and never outside its folder."""

from __future__ import annotations

import errno
import os
import re
import stat
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from middleware.spill.workspace import MAX_ID_CHARS, SpillError, SpillWorkspace, spill_file_name

NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}-[0-9a-f]{16}\.(txt|json)$")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_saves_privately_and_reads_back_exactly(tmp_path: Path) -> None:
    ws = SpillWorkspace("sess-1", tmp_path)
    content = "line one\nligne deux — é\n" * 1000
    path = Path(ws.save("toolu_01", content))
    assert path.parent == tmp_path / "chatcli-agent-sess-1" / "tool-results"
    assert path.read_bytes().decode("utf-8") == content
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700
    assert mode(path.parent.parent) == 0o700
    assert NAME.match(path.name)


def test_same_result_same_file_written_once(tmp_path: Path) -> None:
    ws = SpillWorkspace("s", tmp_path)
    first = Path(ws.save("call_1", "x" * 50_000))
    inode = os.lstat(first).st_ino
    again = Path(SpillWorkspace("s", tmp_path).save("call_1", "x" * 50_000))
    assert again == first
    assert os.lstat(again).st_ino == inode  # reused, not rewritten
    other = Path(ws.save("call_1", "y" * 50_000))
    assert other != first
    assert sorted(p.name for p in first.parent.iterdir()) == sorted([first.name, other.name])


def test_json_suffix_and_bad_suffix(tmp_path: Path) -> None:
    ws = SpillWorkspace("s", tmp_path)
    assert ws.save("c", '{"a": 1}', suffix=".json").endswith(".json")
    with pytest.raises(ValueError, match="suffix"):
        ws.save("c", "text", suffix="/../../x")


@pytest.mark.parametrize(
    "hostile_id",
    ["../../etc/x", "a/b", "C:\\x", "nul\x00byte", "x" * 10_000, "", "   ", "..", "/abs/path"],
)
def test_hostile_ids_never_leave_the_workspace(tmp_path: Path, hostile_id: str) -> None:
    ws = SpillWorkspace("s", tmp_path / "root")
    path = Path(ws.save(hostile_id, "content"))
    assert path.parent == ws.results_dir
    assert NAME.match(path.name)
    assert len(path.name) <= MAX_ID_CHARS + 1 + 16 + 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]


def test_hostile_session_ids_stay_under_the_root(tmp_path: Path) -> None:
    ws = SpillWorkspace("../../outside", tmp_path / "root")
    Path(ws.save("c", "content"))
    assert ws.session_dir.parent == tmp_path / "root"
    assert not (tmp_path / "outside").exists()


def test_a_symlink_planted_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    ws = SpillWorkspace("s", tmp_path / "root")
    ws.save("warmup", "w")  # creates the folders
    victim = tmp_path / "victim.txt"
    victim.write_text("precious", encoding="utf-8")
    target = ws.results_dir / spill_file_name("call_9", "attacker-chosen")
    target.symlink_to(victim)
    path = Path(ws.save("call_9", "attacker-chosen"))
    assert path == target
    assert not path.is_symlink()
    assert path.read_text(encoding="utf-8") == "attacker-chosen"
    assert victim.read_text(encoding="utf-8") == "precious"


def test_a_symlinked_session_folder_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    root = tmp_path / "root"
    root.mkdir()
    (root / "chatcli-agent-s").symlink_to(elsewhere)
    ws = SpillWorkspace("s", root)
    with pytest.raises(SpillError, match="symbolic link"):
        ws.save("c", "content")
    assert list(elsewhere.iterdir()) == []
    ws.close()
    assert elsewhere.exists()  # close never removes what is not ours


def test_a_folder_other_users_can_open_is_refused(tmp_path: Path) -> None:
    (tmp_path / "chatcli-agent-s").mkdir(mode=0o700)
    os.chmod(tmp_path / "chatcli-agent-s", 0o777)
    with pytest.raises(SpillError, match="other users"):
        SpillWorkspace("s", tmp_path).save("c", "content")


def test_a_failed_write_raises_and_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = SpillWorkspace("s", tmp_path)

    def disk_full(src: str, dst: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(SpillError, match="No space left"):
        ws.save("c", "content")
    assert list(ws.results_dir.iterdir()) == []


def test_close_removes_the_workspace_unless_kept(tmp_path: Path) -> None:
    ws = SpillWorkspace("s", tmp_path)
    ws.save("c", "content")
    ws.close()
    ws.close()
    assert not ws.session_dir.exists()
    kept = SpillWorkspace("k", tmp_path, keep=True)
    kept.save("c", "content")
    kept.close()
    assert kept.session_dir.exists()


def test_concurrent_saves_of_the_same_result_agree(tmp_path: Path) -> None:
    ws = SpillWorkspace("s", tmp_path)
    paths: list[str] = []

    def save() -> None:
        paths.append(ws.save("call", "same content\n" * 10_000))

    threads = [threading.Thread(target=save) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(paths)) == 1
    assert [p.name for p in ws.results_dir.iterdir()] == [Path(paths[0]).name]


@settings(max_examples=60)
@given(key=st.text(), content=st.text())
def test_any_key_and_content_round_trip_inside_the_workspace(
    tmp_path_factory: pytest.TempPathFactory, key: str, content: str
) -> None:
    ws = SpillWorkspace("prop", tmp_path_factory.mktemp("spill"))
    path = Path(ws.save(key, content))
    assert path.parent == ws.results_dir
    assert NAME.match(path.name)
    assert path.read_bytes().decode("utf-8", "surrogatepass") == content


def test_load_reads_back_only_what_the_workspace_saved(tmp_path: Path) -> None:
    ws = SpillWorkspace("s", tmp_path / "root")
    location = ws.save("call", "full text é")
    assert ws.load(location) == "full text é"
    outside = tmp_path / "secret.txt"
    outside.write_text("secret", encoding="utf-8")
    assert ws.load(str(outside)) is None
    assert ws.load(str(ws.results_dir / ".." / "x")) is None
    assert ws.load(str(ws.results_dir / spill_file_name("other", "never saved"))) is None
    link = ws.results_dir / spill_file_name("link", "x")
    link.symlink_to(outside)
    assert ws.load(str(link)) is None


# -- issue 13, item 1: closing one pipeline never deletes another's spill files -------------


@pytest.mark.parametrize(
    ("first", "second"),
    [("team/alice", "team.alice"), ("a" * 64 + "-one", "a" * 64 + "-two"), ("x y", "x_y")],
)
def test_distinct_session_ids_never_share_a_folder(tmp_path: Path, first: str, second: str) -> None:
    one, two = SpillWorkspace(first, tmp_path), SpillWorkspace(second, tmp_path)
    assert one.session_dir != two.session_dir
    path = Path(one.save("c", "kept by one"))
    Path(two.save("c", "kept by two"))
    two.close()
    assert path.read_text(encoding="utf-8") == "kept by one"


def test_a_readable_session_id_keeps_its_readable_folder_name(tmp_path: Path) -> None:
    assert SpillWorkspace("agent-7_b", tmp_path).session_dir.name == "chatcli-agent-agent-7_b"


def test_the_same_session_id_twice_shares_the_folder_until_the_last_one_closes(
    tmp_path: Path,
) -> None:
    first, second = SpillWorkspace("shared", tmp_path), SpillWorkspace("shared", tmp_path)
    path = Path(first.save("c", "written by the first"))
    second.save("d", "written by the second")
    first.close()
    assert path.read_text(encoding="utf-8") == "written by the first"  # still in use
    second.close()
    assert not first.session_dir.exists()  # the last user cleans up


def test_a_folder_the_workspace_did_not_create_is_never_removed(tmp_path: Path) -> None:
    foreign = tmp_path / "chatcli-agent-s"
    (foreign / "tool-results").mkdir(parents=True, mode=0o700)
    os.chmod(foreign, 0o700)
    (foreign / "tool-results" / "notes.txt").write_text("someone else's", encoding="utf-8")
    ws = SpillWorkspace("s", tmp_path)
    ws.save("c", "content")
    ws.close()
    assert (foreign / "tool-results" / "notes.txt").read_text(encoding="utf-8") == "someone else's"


def test_a_refused_folder_is_left_alone_by_close(tmp_path: Path) -> None:
    refused = tmp_path / "chatcli-agent-s"
    refused.mkdir(mode=0o700)
    os.chmod(refused, 0o755)  # others can read: refused
    (refused / "theirs.txt").write_text("theirs", encoding="utf-8")
    ws = SpillWorkspace("s", tmp_path)
    with pytest.raises(SpillError):
        ws.save("c", "content")
    ws.close()
    assert (refused / "theirs.txt").exists()


def test_a_kept_workspace_is_not_removed_by_a_later_ephemeral_user(tmp_path: Path) -> None:
    kept = SpillWorkspace("cli", tmp_path, keep=True)
    path = Path(kept.save("c", "keep me"))
    kept.close()
    later = SpillWorkspace("cli", tmp_path)
    later.save("d", "other")
    later.close()
    assert path.read_text(encoding="utf-8") == "keep me"


def test_a_closed_workspace_refuses_to_save_and_never_recreates_its_folder(tmp_path: Path) -> None:
    ws = SpillWorkspace("s", tmp_path)
    ws.save("c", "content")
    ws.close()
    with pytest.raises(SpillError, match="closed"):
        ws.save("d", "late")
    assert not ws.session_dir.exists()


# -- issue 13, item 5: an existing file is reused only if it holds the same content ------


def test_a_stale_file_with_other_content_is_replaced_not_reused(tmp_path: Path) -> None:
    ws = SpillWorkspace("s", tmp_path)
    content = "the real output\n" * 100
    target = ws.results_dir / spill_file_name("call_1", content)
    ws.save("warmup", "w")
    target.write_text("x" * len(content.encode()), encoding="utf-8")  # same size, other text
    os.chmod(target, 0o644)
    path = Path(SpillWorkspace("s", tmp_path).save("call_1", content))
    assert path == target
    assert path.read_text(encoding="utf-8") == content
    assert mode(path) == 0o600
