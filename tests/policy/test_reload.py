"""Hot reload through the file system (watchfiles): edits, atomic saves, symlink swaps."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import middleware
from middleware import hookimpl
from middleware.plugin.host import PluginHost

PLAIN = "version: 1\nname: {name}\nbudget:\n  max_result_chars: {cap}\n"


def wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(PLAIN.format(name="one", cap=20000), encoding="utf-8")
    return path


def test_an_edit_swaps_the_policy(policy: Path) -> None:
    with middleware.Pipeline.from_policy(policy, watch=True) as pipe:
        assert pipe.policy.name == "one"
        assert pipe.policy_status.generation == 1
        policy.write_text(PLAIN.format(name="two", cap=30000), encoding="utf-8")
        assert wait_for(lambda: pipe.policy.name == "two")
        assert pipe.policy.get("budget.max_result_chars") == 30000
        assert pipe.policy_status.generation == 2
        assert pipe.policy_status.last_reload_ok


def test_an_invalid_edit_keeps_the_last_good_policy_and_says_where(policy: Path) -> None:
    with middleware.Pipeline.from_policy(policy, watch=True) as pipe:
        policy.write_text("version: 1\nbudget:\n  max_result_char: 5\n", encoding="utf-8")
        assert wait_for(lambda: not pipe.policy_status.last_reload_ok)
        status = pipe.policy_status
        assert pipe.policy.name == "one"
        assert status.generation == 1
        assert status.last_error is not None
        assert status.last_error.startswith(f"{policy}:3:")
        assert "did you mean 'max_result_chars'?" in status.last_error
        policy.write_text(PLAIN.format(name="fixed", cap=25000), encoding="utf-8")
        assert wait_for(lambda: pipe.policy.name == "fixed")
        assert pipe.policy_status.last_error is None


def test_an_editor_atomic_save_is_seen(policy: Path) -> None:
    with middleware.Pipeline.from_policy(policy, watch=True) as pipe:
        temporary = policy.with_name(".policy.yaml.swp")
        temporary.write_text(PLAIN.format(name="renamed", cap=40000), encoding="utf-8")
        os.replace(temporary, policy)
        assert wait_for(lambda: pipe.policy.name == "renamed")


def test_a_configmap_symlink_swap_is_seen(tmp_path: Path) -> None:
    mount = tmp_path / "mount"
    mount.mkdir()
    first = mount / "..2026_11_23_01"
    first.mkdir()
    (first / "policy.yaml").write_text(PLAIN.format(name="v1", cap=20000), encoding="utf-8")
    (mount / "..data").symlink_to(first.name)
    (mount / "policy.yaml").symlink_to("..data/policy.yaml")
    with middleware.Pipeline.from_policy(mount / "policy.yaml", watch=True) as pipe:
        assert pipe.policy.name == "v1"
        second = mount / "..2026_11_23_02"
        second.mkdir()
        (second / "policy.yaml").write_text(PLAIN.format(name="v2", cap=20000), encoding="utf-8")
        link = mount / "..data_tmp"
        link.symlink_to(second.name)
        os.replace(link, mount / "..data")  # what the kubelet does
        assert wait_for(lambda: pipe.policy.name == "v2")


def test_policy_reloaded_fires_after_the_swap(policy: Path) -> None:
    seen: list[tuple[str, str, str]] = []
    holder: list[middleware.Pipeline] = []

    class Listener:
        @hookimpl
        def policy_reloaded(self, old: middleware.Policy, new: middleware.Policy) -> None:
            seen.append((old.name, new.name, holder[0].policy.name))

    host = PluginHost.create(load_entrypoints=False)
    host.register(Listener(), name="listener")
    with middleware.Pipeline.from_policy(policy, host=host, watch=True) as pipe:
        holder.append(pipe)
        policy.write_text(PLAIN.format(name="two", cap=30000), encoding="utf-8")
        assert wait_for(lambda: bool(seen))
    assert seen == [("one", "two", "two")]


def test_threads_never_see_a_mixed_policy_during_a_storm_of_reloads(policy: Path) -> None:
    # Each policy's name says its cap: a request processed under one snapshot must report
    # that snapshot's name and be cut at that snapshot's cap.
    caps = {"small": 1000, "large": 3000}
    big = "x" * 5000
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": big},
    ]  # fmt: skip
    errors: list[str] = []
    stop = threading.Event()
    with middleware.Pipeline.from_policy(policy, watch=True) as pipe:

        def worker() -> None:
            while not stop.is_set():
                result = pipe.process(messages)
                name = result.report.policy
                if name in caps:
                    (action,) = result.report.by_step("budget")
                    if action.detail["cap"] != caps[name]:
                        errors.append(f"{name} used cap {action.detail['cap']}")

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        # Each edit is swapped in while the workers run (a file that keeps changing is not
        # swapped in until it settles, so each edit waits for its swap).
        for i in range(10):
            name = "small" if i % 2 else "large"
            policy.write_text(PLAIN.format(name=name, cap=caps[name]), encoding="utf-8")
            assert wait_for(lambda name=name: pipe.policy.name == name)  # type: ignore[misc]
        stop.set()
        for t in threads:
            t.join()
        assert pipe.policy_status.generation == 11
    assert errors == []


def test_closing_stops_the_watcher_and_watch_needs_a_file(policy: Path) -> None:
    pipe = middleware.Pipeline.from_policy(policy, watch=True)
    watcher = pipe._watcher
    assert watcher is not None
    pipe.close()
    assert not watcher._thread.is_alive()
    with pytest.raises(TypeError, match="needs the path"):
        middleware.Pipeline.from_policy(None, watch=True)
    with pytest.raises(RuntimeError, match="does not watch"):
        middleware.Pipeline.from_policy(None).reload_policy()


def test_reload_works_in_an_asyncio_host(policy: Path) -> None:
    import asyncio

    async def host() -> list[str]:
        names = []
        with middleware.Pipeline.from_policy(policy, watch=True) as pipe:
            messages = [{"role": "user", "content": "hi"}]
            names.append((await asyncio.to_thread(pipe.process, messages)).report.policy)
            policy.write_text(PLAIN.format(name="async", cap=20000), encoding="utf-8")
            for _ in range(500):
                if pipe.policy.name == "async":
                    break
                await asyncio.sleep(0.02)
            names.append((await asyncio.to_thread(pipe.process, messages)).report.policy)
        return names

    assert asyncio.run(host()) == ["one", "async"]


# -- the watcher never dies, never goes deaf, never swaps in half a file (#13, item 17) --


@pytest.mark.parametrize(
    "bad",
    [
        "version: 1\nname: !!python/object/apply:os.system ['true']\n",
        b"version: 1\nname: caf\xe9\n",
        "version: 1\n? [a, b]\n: two\n",
        "version: 1\nbudget:\n  max_result_chars: " + "9" * 5000 + "\n",
        "version: 1\nname: " + "[" * 5000 + "]" * 5000 + "\n",
        "version: 1\nbudget:\n  context_aware:\n    chars_per_token: .nan\n",
    ],
    ids=["python-tag", "latin-1", "list-key", "huge-int", "deep", "nan"],
)
def test_the_watcher_survives_every_kind_of_bad_edit(policy: Path, bad: str | bytes) -> None:
    with middleware.Pipeline.from_policy(policy, watch=True) as pipe:
        if isinstance(bad, bytes):
            policy.write_bytes(bad)
        else:
            policy.write_text(bad, encoding="utf-8")
        assert wait_for(lambda: not pipe.policy_status.last_reload_ok)
        error = pipe.policy_status.last_error
        assert error is not None and error.startswith(f"{policy}:")
        assert pipe.policy.name == "one"
        policy.write_text(PLAIN.format(name="fixed", cap=25000), encoding="utf-8")
        assert wait_for(lambda: pipe.policy.name == "fixed")
        assert pipe.policy_status.last_reload_ok
        assert pipe.policy_status.generation == 2


def test_the_watcher_survives_an_unexpected_error(policy: Path) -> None:
    """A bug while loading (anything but a PolicyError) is reported, not fatal."""
    with middleware.Pipeline.from_policy(policy, watch=True) as pipe:
        watcher = pipe._watcher
        assert watcher is not None
        real_load = watcher.load
        broken = threading.Event()
        broken.set()

        def load() -> middleware.Policy:
            if broken.is_set():
                raise RuntimeError("a bug in a layer")
            return real_load()

        watcher.load = load  # type: ignore[method-assign]
        policy.write_text(PLAIN.format(name="two", cap=30000), encoding="utf-8")
        assert wait_for(lambda: not pipe.policy_status.last_reload_ok)
        assert "RuntimeError" in (pipe.policy_status.last_error or "")
        assert pipe.policy.name == "one"
        broken.clear()
        policy.write_text(PLAIN.format(name="three", cap=30000), encoding="utf-8")
        assert wait_for(lambda: pipe.policy.name == "three")
        assert pipe.policy_status.last_reload_ok
        assert watcher._thread.is_alive()


def test_a_failing_swap_listener_does_not_stop_the_watcher(policy: Path) -> None:
    with middleware.Pipeline.from_policy(policy, watch=True) as pipe:
        watcher = pipe._watcher
        assert watcher is not None
        swap = watcher.on_swap
        seen: list[str] = []

        def on_swap(new: middleware.Policy) -> None:
            seen.append(new.name)
            swap(new)
            if new.name == "two":
                raise RuntimeError("a listener bug")

        watcher.on_swap = on_swap
        policy.write_text(PLAIN.format(name="two", cap=30000), encoding="utf-8")
        assert wait_for(lambda: seen == ["two"])
        policy.write_text(PLAIN.format(name="three", cap=30000), encoding="utf-8")
        assert wait_for(lambda: pipe.policy.name == "three")
        assert watcher._thread.is_alive()


def test_a_deleted_and_recreated_folder_is_watched_again(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    path = folder / "policy.yaml"
    path.write_text(PLAIN.format(name="one", cap=20000), encoding="utf-8")
    with middleware.Pipeline.from_policy(path, watch=True) as pipe:
        shutil.rmtree(folder)
        assert wait_for(lambda: not pipe.policy_status.last_reload_ok)
        assert pipe.policy.name == "one"
        folder.mkdir()
        path.write_text(PLAIN.format(name="two", cap=20000), encoding="utf-8")
        assert wait_for(lambda: pipe.policy.name == "two")
        path.write_text(PLAIN.format(name="three", cap=20000), encoding="utf-8")
        assert wait_for(lambda: pipe.policy.name == "three")
        # Replaced by another folder of the same name (a rename, not a delete).
        folder.rename(tmp_path / "old")
        folder.mkdir()
        path.write_text(PLAIN.format(name="four", cap=20000), encoding="utf-8")
        assert wait_for(lambda: pipe.policy.name == "four")
        assert pipe.policy_status.last_reload_ok


def test_a_file_written_in_pieces_is_swapped_in_whole(policy: Path) -> None:
    """A writer that does not save atomically: the watcher reads the file half-written (it
    happens to parse), then the writer finishes. Only the whole file may be swapped in."""
    swapped: list[str] = []
    with middleware.Pipeline.from_policy(policy, watch=True) as pipe:
        watcher = pipe._watcher
        assert watcher is not None
        swap = watcher.on_swap

        def record(new: middleware.Policy) -> None:
            swapped.append(new.name)
            swap(new)

        watcher.on_swap = record
        with policy.open("w", encoding="utf-8") as writer:
            writer.write("version: 1\nname: partial")
            writer.flush()
            real_load = watcher.load

            def load() -> middleware.Policy:
                """Read as the watcher does, then let the writer finish (once)."""
                loaded = real_load()
                if not writer.closed:
                    writer.write("ly-written\nbudget:\n  max_result_chars: 30000\n")
                    writer.close()
                return loaded

            watcher.load = load  # type: ignore[method-assign]
            assert wait_for(lambda: writer.closed)
        assert wait_for(lambda: pipe.policy.name == "partially-written")
        assert pipe.policy.get("budget.max_result_chars") == 30000
    assert swapped == ["partially-written"]


def counting_loads(pipe: middleware.Pipeline) -> list[float]:
    """The times the pipeline's watcher reads the policy files from now on (once the read
    that follows arming a watch is over)."""
    watcher = pipe._watcher
    assert watcher is not None
    assert wait_for(lambda: not watcher._rearmed)
    time.sleep(0.5)
    reads: list[float] = []
    real_load = watcher.load

    def load() -> middleware.Policy:
        reads.append(time.monotonic())
        return real_load()

    watcher.load = load  # type: ignore[method-assign]
    return reads


def test_files_written_beside_the_policy_are_never_read(policy: Path) -> None:
    """A proxy's log, its spill folders or other policies next to the policy file: none is
    watched (a recursive watch of the working folder once re-read the policy 119 times in
    18 s while idle)."""
    with middleware.Pipeline.from_policy(policy, watch=True) as pipe:
        assert pipe._watcher is not None
        assert pipe._watcher.watching == (policy.absolute(),)
        reads = counting_loads(pipe)
        nested = policy.parent / "spill" / "chatcli-agent-s" / "tool-results"
        nested.mkdir(parents=True)
        for i in range(100):
            (policy.parent / f"other-{i}.yaml").write_text(PLAIN.format(name=i, cap=1000))
            (nested / f"r-{i}.txt").write_text("x" * i)
        with (policy.parent / "proxy.log").open("a") as log:
            for i in range(100):
                log.write(f"line {i}\n")
                log.flush()
        time.sleep(1.0)
        assert reads == []
        policy.write_text(PLAIN.format(name="two", cap=30000), encoding="utf-8")
        assert wait_for(lambda: pipe.policy.name == "two")
        assert reads  # the policy's own file still is


def test_a_preset_watches_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the folder a preset's name used to resolve into
    with middleware.Pipeline.from_policy("preset:claude-code", watch=True) as pipe:
        watcher = pipe._watcher
        assert watcher is not None
        assert watcher.watching == () and not watcher._thread.is_alive()
        assert pipe.policy_status.last_reload_ok


def test_the_extends_chain_is_watched_and_followed_when_it_changes(tmp_path: Path) -> None:
    shared, own = tmp_path / "shared", tmp_path / "own"
    shared.mkdir()
    own.mkdir()
    base, other = shared / "base.yaml", shared / "other.yaml"
    base.write_text("version: 1\nbudget:\n  max_result_chars: 1000\n", encoding="utf-8")
    other.write_text("version: 1\nbudget:\n  max_result_chars: 3000\n", encoding="utf-8")
    policy = own / "policy.yaml"
    policy.write_text("version: 1\nname: mine\nextends: ../shared/base.yaml\n", encoding="utf-8")
    cap = "budget.max_result_chars"
    with middleware.Pipeline.from_policy(policy, watch=True) as pipe:
        assert pipe._watcher is not None
        assert set(pipe._watcher.watching) == {policy.absolute(), own / "../shared/base.yaml"}
        base.write_text("version: 1\nbudget:\n  max_result_chars: 2000\n", encoding="utf-8")
        assert wait_for(lambda: pipe.policy.get(cap) == 2000)
        policy.write_text("version: 1\nname: mine\nextends: ../shared/other.yaml\n", "utf-8")
        assert wait_for(lambda: pipe.policy.get(cap) == 3000)
        watcher = pipe._watcher
        assert wait_for(lambda: (own / "../shared/other.yaml") in watcher.watching)
        reads = counting_loads(pipe)
        base.write_text("version: 1\nbudget:\n  max_result_chars: 9\n", encoding="utf-8")
        time.sleep(0.8)
        assert reads == []  # no longer part of the policy
        other.write_text("version: 1\nbudget:\n  max_result_chars: 4000\n", encoding="utf-8")
        assert wait_for(lambda: pipe.policy.get(cap) == 4000)
