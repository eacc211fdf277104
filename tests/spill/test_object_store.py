"""Spill stores in an object store, against a real S3-compatible server on loopback (moto's
standalone server; s3fs talks to it over HTTP as it would to S3): replicas that agree,
objects written once and whole, recall from another process, a restart, a store that goes
down mid-session."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from object_store import S3Server, hanging_server, s3_server, set_credentials
from replica import Replica
from session_builders import tool_session

from middleware import Pipeline, load_policy
from middleware.policy.settings import bind
from middleware.spill import SpillError, SpillSettings, SpillTimeout, open_root, open_store
from middleware.spill.layout import spill_file_name
from middleware.spill.objects import ObjectRoot, ObjectWorkspace
from middleware.spill.retention import collect, forget

#: It times a real wait: it runs in the suite's "timing" group, never beside another such
#: test (pyproject.toml's addopts).
pytestmark = pytest.mark.xdist_group("timing")

pytest.importorskip("s3fs", reason="the object-store tests need the [s3] extra")


def log(i: int, lines: int) -> str:
    return "".join(f"step {i}: line {n} of the build log, status ok\n" for n in range(lines))


#: An agent's session: outputs of a few hundred characters to 90 KB, some over the default
#: cap (spilled), and old enough by the end to be compacted.
OUTPUTS = [("bash", log(i, 20 + (i * 397) % 1800)) for i in range(14)]


def requests() -> list[list[dict[str, Any]]]:
    """What the agent sends: the history as it grows, one tool output more each time."""
    return [tool_session(*OUTPUTS[: n + 1]) for n in range(len(OUTPUTS))]


def settings(s3: S3Server, url: str, **overrides: Any) -> SpillSettings:
    policy = load_policy(None, overrides=s3.policy(url, **overrides), dotenv_path=False)
    return bind(policy, SpillSettings)


def test_two_replicas_alternating_send_what_one_sends_and_write_each_object_once(
    s3: S3Server, bucket: str
) -> None:
    url = f"s3://{bucket}/spill"
    with Replica("shared", s3.policy(url)) as one, Replica("shared", s3.policy(url)) as two:
        alternating = [
            (one if i % 2 == 0 else two).process_body(history)
            for i, history in enumerate(requests())
        ]
    written = s3.versions(url)
    with Replica("shared", s3.policy(url)) as single:
        alone = [single.process_body(history) for history in requests()]
    assert [a["sent"] for a in alternating] == [a["sent"] for a in alone]  # byte for byte
    paths = {path for a in alternating for kind, path in a["actions"] if kind == "spilled"}
    assert paths and all(p.startswith(f"{url}/chatcli-agent-shared/tool-results/") for p in paths)
    assert any(path in alternating[-1]["sent"] for path in paths)  # the preview names it
    results = {p.removeprefix(f"s3://{bucket}/") for p in paths}
    assert results <= set(written)
    # each result written once, by whichever replica came first; each replica wrote the
    # session's marker once (what gc reads the session's age from)
    assert {key: n for key, n in written.items() if "/tool-results/" in key} == dict.fromkeys(
        [key for key in written if "/tool-results/" in key], 1
    )
    assert written["spill/chatcli-agent-shared/.chatcli-workspace"] == 2
    again = s3.versions(url)
    assert {k: n for k, n in again.items() if "/tool-results/" in k} == {
        k: n for k, n in written.items() if "/tool-results/" in k
    }  # the third replica wrote no result


def test_a_result_spilled_by_one_replica_is_read_through_another(s3: S3Server, bucket: str) -> None:
    url = f"s3://{bucket}/p"
    history = tool_session(("bash", log(1, 2000)))
    with Replica("read-me", s3.policy(url)) as one:
        spilled = [p for kind, p in one.process_body(history)["actions"] if kind == "spilled"]
    with Replica("read-me", s3.policy(url)) as other:
        assert other.load(spilled[0]) == log(1, 2000)
        assert other.load(spilled[0].replace("read-me", "someone-else")) is None


def test_a_restarted_replica_finds_what_was_spilled_before(s3: S3Server, bucket: str) -> None:
    url = f"s3://{bucket}/restart"
    overrides = s3.policy(url)
    with Replica("r", overrides) as before:
        first = before.process_body(requests()[5])
    # A new process: nothing of the first one's memory, only the store.
    with Replica("r", overrides) as after:
        again = after.process_body(requests()[5])
        locations = [p for kind, p in first["actions"] if kind == "spilled"]
        assert [after.load(p) for p in locations] == [
            next(text for _, text in OUTPUTS if spill_file_name("x", text)[-20:] in p)
            for p in locations
        ]
    assert again["sent"] == first["sent"]
    assert {n for key, n in s3.versions(url).items() if "/tool-results/" in key} == {1}


def test_an_agent_holding_a_preview_gets_it_recognised_by_any_replica(
    s3: S3Server, bucket: str
) -> None:
    overrides = s3.policy(f"s3://{bucket}/admit")
    policy = load_policy(None, overrides=overrides, dotenv_path=False)
    with Pipeline(policy, session_id="held") as pipe:
        preview = pipe.admit("bash", "c0", log(0, 3000)).text
    history = tool_session(("bash", preview))
    with Replica("held", overrides) as other:
        answer = other.process_body(history)
    assert json.loads(answer["sent"]) == history  # its own preview: left as it is
    assert answer["actions"] == []


def test_a_store_that_goes_down_mid_session_keeps_results_whole() -> None:
    with s3_server() as server:
        bucket = server.bucket(versioned=False)
        overrides = server.policy(f"s3://{bucket}/down", **{"spill.retry_after_seconds": 60})
        policy = load_policy(None, overrides=overrides, dotenv_path=False)
        pipe = Pipeline(policy, session_id="down")
        before = pipe.process(requests()[3])
        assert any(a.kind == "spilled" for a in before.report.actions)
        server.stop()
        history = tool_session(*OUTPUTS[:4], ("bash", "new " * 9000), ("bash", "also " * 9000))
        started = time.monotonic()
        after = pipe.process(history)
        elapsed = time.monotonic() - started
        failed = [a for a in after.report.actions if a.kind == "spill_failed"]
        assert len(failed) == 2 and all(a.detail["action"] == "kept whole" for a in failed)
        assert "EndpointConnectionError" in failed[0].detail["error"]
        assert "spill.retry_after_seconds" in failed[1].detail["error"]  # at once, no wait
        assert after.messages[-1]["content"] == "also " * 9000
        assert after.messages[-3]["content"] == "new " * 9000
        # what was saved before the store went down is still named, as it was
        assert after.messages[:9] == before.messages
        assert elapsed < 15  # one failed attempt (two tries), then none
        pipe.close()


def test_a_store_that_is_down_truncates_when_the_policy_says_so() -> None:
    with s3_server() as server:
        bucket = server.bucket(versioned=False)
        overrides = server.policy(f"s3://{bucket}/t", **{"spill.on_error": "truncate"})
    policy = load_policy(None, overrides=overrides, dotenv_path=False)
    with Pipeline(policy, session_id="t") as pipe:
        result = pipe.process(tool_session(("bash", "x" * 60_000)))
    (action,) = result.report.actions
    assert action.kind == "truncated_unsaved"
    assert len(result.messages[-1]["content"]) < 30_000


def test_load_reads_only_what_the_store_saved(s3: S3Server, bucket: str) -> None:
    store = open_store("s", settings(s3, f"s3://{bucket}/only"))
    assert isinstance(store, ObjectWorkspace)
    location = store.save("call_1", "the full text é")
    assert location.startswith(f"s3://{bucket}/only/chatcli-agent-s/tool-results/call_1-")
    assert store.load(location) == "the full text é"
    fs = s3.filesystem()
    forged = location.rsplit("/", 1)[0] + "/" + spill_file_name("call_2", "expected")
    fs.pipe_file(forged.removeprefix("s3://"), b"something else")  # wrong digest
    outside = f"s3://{bucket}/only/secret.txt"
    fs.pipe_file(outside.removeprefix("s3://"), b"secret")
    fresh = ObjectRoot(fs, f"{bucket}/only", retry_after=0).workspace("s")
    assert fresh.load(location) == "the full text é"
    assert fresh.load(forged) is None
    assert fresh.load(outside) is None
    assert fresh.load(location.replace("/tool-results/", "/tool-results/../")) is None
    assert fresh.load(f"s3://{bucket}/other/chatcli-agent-s/tool-results/" + location[-26:]) is None


def test_saves_are_whole_objects_never_seen_in_part(s3: S3Server, bucket: str) -> None:
    url = f"s3://{bucket}/atomic"
    store = open_store("a", settings(s3, url))
    content = "0123456789abcdef" * 400_000  # 6.4 MB
    name = spill_file_name("big", content)
    location = f"{url}/chatcli-agent-a/tool-results/{name}"
    reader = ObjectRoot(s3.filesystem(), f"{bucket}/atomic", retry_after=0)
    seen: list[str | None] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.append(reader.read("chatcli-agent-a", name))

    thread = threading.Thread(target=read)
    thread.start()
    try:
        assert store.save("big", content) == location
    finally:
        done.set()
        thread.join()
    assert seen and {len(text) for text in seen if text is not None} <= {len(content)}
    info = s3.filesystem().info(location)
    assert "-" not in info["ETag"]  # one PUT, not a multipart upload
    assert reader.read("chatcli-agent-a", name) == content


def test_credentials_and_endpoint_from_the_environment(
    s3: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    policy = load_policy(None, overrides={"spill.url": f"s3://{bucket}/env"}, dotenv_path=False)
    store = open_store("e", bind(policy, SpillSettings))
    assert store.load(store.save("k", "from the environment")) == "from the environment"


def test_a_bucket_that_does_not_exist_is_a_spill_error_naming_the_fix(s3: S3Server) -> None:
    store = open_store("n", settings(s3, "s3://no-such-bucket-here/x"))
    with pytest.raises(SpillError, match=r"NoSuchBucket|does not exist.*spill\.url"):
        store.save("k", "text")


def test_gc_removes_old_sessions_and_only_what_a_store_wrote(s3: S3Server, bucket: str) -> None:
    url = f"s3://{bucket}/gc"
    spill = settings(s3, url)
    for session in ("old", "ended"):
        open_store(session, spill).save("k", f"output of {session}")
    fs = s3.filesystem()
    fs.pipe_file(f"{bucket}/gc/chatcli-agent-old/notes.txt", b"someone else's")
    fs.pipe_file(f"{bucket}/gc/chatcli-agent-stray/tool-results/x-0123456789abcdef.txt", b"?")
    root = open_root(spill)
    assert {f.name for f in root.sessions()} == {"chatcli-agent-old", "chatcli-agent-ended"}
    assert collect(root, 3600).removed == []  # written just now
    later = time.time() + 8 * 86400
    listed = collect(root, 7 * 86400, now=later, dry_run=True).removed
    assert {f.name for f in listed} == {"chatcli-agent-old", "chatcli-agent-ended"}
    assert forget(root, "ended")
    assert [f.name for f in collect(root, 7 * 86400, now=later).removed] == ["chatcli-agent-old"]
    left = sorted(fs.find(f"{bucket}/gc"))
    assert left == [
        f"{bucket}/gc/chatcli-agent-old/notes.txt",
        f"{bucket}/gc/chatcli-agent-stray/tool-results/x-0123456789abcdef.txt",
    ]
    assert not forget(root, "ended")


def test_without_the_extra_the_error_names_it() -> None:
    code = (
        "import sys; sys.modules['fsspec'] = None; sys.modules['fsspec.core'] = None\n"
        "from middleware import Pipeline, load_policy\n"
        "Pipeline(load_policy(None, overrides={'spill.url': 's3://b/p'}, dotenv_path=False))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert "MissingExtraError: spill.url s3://b/p needs s3fs" in last
    assert "[s3]" in last


def test_a_url_fsspec_cannot_open_is_a_spill_error() -> None:
    policy = load_policy(None, overrides={"spill.url": "nosuchproto://x/y"}, dotenv_path=False)
    with pytest.raises(SpillError, match=r"spill\.url nosuchproto://x/y"):
        open_store("s", bind(policy, SpillSettings))


def test_replicas_racing_to_spill_the_same_output_write_it_once(
    s3: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"s3://{bucket}/race"
    roots = [ObjectRoot(s3.filesystem(), f"{bucket}/race", retry_after=0) for _ in range(2)]
    both_looked = threading.Barrier(2, timeout=30)
    for root in roots:
        looked = root._get

        def look_then_wait(path: str, looked: Any = looked) -> bytes | None:
            found: bytes | None = looked(path)
            if "/tool-results/" in path and found is None:
                both_looked.wait()  # each saw nothing there: both go on to write
            return found

        monkeypatch.setattr(root, "_get", look_then_wait)
    locations: list[str] = []
    threads = [
        threading.Thread(target=lambda r=r: locations.append(r.workspace("s").save("k", "same")))
        for r in roots
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(locations) == 2 and len(set(locations)) == 1
    assert {k: n for k, n in s3.versions(url).items() if "/tool-results/" in k} == {
        locations[0].removeprefix(f"s3://{bucket}/"): 1
    }


def test_a_store_without_conditional_writes_gets_plain_ones(
    s3: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs = s3.filesystem()
    plain = fs.pipe_file

    def no_conditions(path: str, data: bytes, mode: str = "overwrite", **kwargs: Any) -> Any:
        if mode == "create":
            raise NotImplementedError("501 NotImplemented: If-None-Match")
        return plain(path, data, **kwargs)

    monkeypatch.setattr(fs, "pipe_file", no_conditions)
    store = ObjectRoot(fs, f"{bucket}/plain", retry_after=60).workspace("p")
    for n in range(3):
        location = store.save(f"k{n}", f"output {n}")
        assert store.load(location) == f"output {n}"


def test_a_store_that_never_answers_costs_one_deadline_not_the_request() -> None:
    """A store that accepts connections and never answers (issue 26, item 1): a spilling
    request once held 700 s. Each call now has a deadline, retries included; the result
    stays whole (spill.on_error), the store counts as down, and later spills fail at once."""
    set_credentials()
    with hanging_server() as endpoint:
        overrides = {
            "spill.url": "s3://hung/prefix",
            "spill.storage_options": {"client_kwargs": {"endpoint_url": endpoint}},
            "spill.timeout_seconds": 1,
            "spill.retry_after_seconds": 60,
        }
        policy = load_policy(None, overrides=overrides, dotenv_path=False)
        root = open_root(bind(policy, SpillSettings))
        with Pipeline(policy, session_id="hung") as pipe:
            started = time.monotonic()
            first = pipe.process(tool_session(("bash", "a " * 20_000), ("bash", "b " * 20_000)))
            elapsed = time.monotonic() - started
            failed = [a for a in first.report.actions if a.kind == "spill_failed"]
            assert [a.detail["action"] for a in failed] == ["kept whole", "kept whole"]
            assert "no answer within 1 s (spill.timeout_seconds)" in failed[0].detail["error"]
            assert "spill.retry_after_seconds" in failed[1].detail["error"]  # at once
            assert first.messages[-1]["content"] == "b " * 20_000
            assert elapsed < 20  # one deadline (s3fs alone would wait minutes)
            assert root.trouble is not None and "spill.timeout_seconds" in root.trouble
            with pytest.raises(SpillError, match="retry_after_seconds"):
                root.read("chatcli-agent-hung", spill_file_name("k", "text", ".txt"))


def test_listing_and_removing_in_a_hung_store_miss_their_deadline_too() -> None:
    set_credentials()
    with hanging_server() as endpoint:
        fs = s3fs_for(endpoint)
        root = ObjectRoot(fs, "hung/prefix", retry_after=60, timeout=0.5)
        with pytest.raises(SpillTimeout):
            root.sessions()
        with pytest.raises(SpillTimeout):
            root.remove("chatcli-agent-x")
        with pytest.raises(SpillTimeout):
            root.read("chatcli-agent-x", spill_file_name("k", "text", ".txt"))
        assert root.trouble is not None  # a read that hung counts the store as down


def s3fs_for(endpoint: str) -> Any:
    import s3fs

    return s3fs.S3FileSystem(
        skip_instance_cache=True,
        client_kwargs={"endpoint_url": endpoint},
        config_kwargs={"retries": {"max_attempts": 1}},
    )
