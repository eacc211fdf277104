"""Read-backs counted live (issue 45, item 2): in the request that follows, the proxy sees
that the agent went back for what a step hid: a read of a spill file (any tool, a shell
command), a call of the proxy's ``/recall``, a read of a file whose last read was compacted.
Each once (its call id), on the request whose new part carries it, in every wire format."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware.conversations import readbacks as readbacks_module
from middleware.conversations.cleaning import Cleaned, clean_body
from middleware.conversations.readbacks import ReadBack
from middleware.conversations.sessions import SessionPool
from middleware.formats import get_codec
from middleware.plugin.host import PluginHost

#: A shell output far over the default result cap: spilled by the budget step.
BIG = "".join(f"row {i:04d} {'y' * 90}\n" for i in range(1, 401))
#: A file's text, long enough to be compacted once it is old.
SOURCE = "".join(f"def f{i}():\n    return {i}\n" for i in range(400))
#: What reading part of a spilled output back gives.
PART = "".join(BIG.splitlines(keepends=True)[20:60])

Event = tuple[Any, ...]


def user(text: str) -> Event:
    return ("user", text)


def call(call_id: str, name: str, arguments: dict[str, Any]) -> Event:
    return ("call", call_id, name, arguments)


def result(call_id: str, text: str) -> Event:
    return ("result", call_id, text)


def said(text: str) -> Event:
    return ("said", text)


def body(fmt: str, events: list[Event]) -> dict[str, Any]:
    """A request body of wire format ``fmt`` holding ``events`` (consecutive calls are one
    assistant turn, consecutive results one user turn)."""
    groups: list[list[Event]] = []
    for event in events:
        if groups and groups[-1][0][0] == event[0] and event[0] in ("call", "result"):
            groups[-1].append(event)
        else:
            groups.append([event])
    names = {e[1]: e[2] for e in events if e[0] == "call"}
    wire = [item for group in groups for item in WIRE[fmt](group, names)]
    if fmt == "gemini":
        return {"contents": wire}
    if fmt == "responses":
        return {"model": "gpt-stand-in", "input": wire}
    return {"model": "stand-in", "max_tokens": 100, "messages": wire}


def _chat(group: list[Event], names: dict[str, str], fmt: str) -> list[dict[str, Any]]:
    """Anthropic's or Chat Completions' messages of one group of events."""
    kind = group[0][0]
    if kind in ("user", "said"):
        return [{"role": "user" if kind == "user" else "assistant", "content": group[0][1]}]
    if kind == "call" and fmt == "anthropic":
        return [{"role": "assistant", "content": [
            {"type": "tool_use", "id": e[1], "name": e[2], "input": e[3]} for e in group
        ]}]  # fmt: skip
    if kind == "call":
        return [{"role": "assistant", "content": None, "tool_calls": [
            {"id": e[1], "type": "function",
             "function": {"name": e[2], "arguments": json.dumps(e[3])}} for e in group
        ]}]  # fmt: skip
    if fmt == "anthropic":
        return [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": e[1], "content": e[2]} for e in group
        ]}]  # fmt: skip
    return [{"role": "tool", "tool_call_id": e[1], "content": e[2]} for e in group]


def _responses(group: list[Event], names: dict[str, str]) -> list[dict[str, Any]]:
    said = {"user": ("user", "input_text"), "said": ("assistant", "output_text")}
    return [
        {
            "type": "message",
            "role": said[e[0]][0],
            "content": [{"type": said[e[0]][1], "text": e[1]}],
        }
        if e[0] in said
        else {"type": "function_call", "call_id": e[1], "name": e[2], "arguments": json.dumps(e[3])}
        if e[0] == "call"
        else {"type": "function_call_output", "call_id": e[1], "output": e[2]}
        for e in group
    ]


def _gemini(group: list[Event], names: dict[str, str]) -> list[dict[str, Any]]:
    kind = group[0][0]
    role = "user" if kind in ("user", "result") else "model"
    parts = [
        {"text": e[1]}
        if kind in ("user", "said")
        else {"functionCall": {"id": e[1], "name": e[2], "args": e[3]}}
        if kind == "call"
        else {"functionResponse": {"id": e[1], "name": names[e[1]], "response": {"output": e[2]}}}
        for e in group
    ]
    return [{"role": role, "parts": parts}]


#: How each wire format writes a group of events.
WIRE = {
    "anthropic": lambda group, names: _chat(group, names, "anthropic"),
    "openai": lambda group, names: _chat(group, names, "openai"),
    "responses": _responses,
    "gemini": _gemini,
}


class Session:
    """One conversation's requests through :func:`clean_body`, as the proxy sends them."""

    def __init__(self, tmp_path: Path, fmt: str, **overrides: Any) -> None:
        self.fmt = fmt
        self.policy = middleware.load_policy(
            None,
            env={},
            dotenv_path=False,
            overrides={"spill.root": str(tmp_path), **overrides},
        )
        self.pool = SessionPool.for_policy(PluginHost.create(load_entrypoints=False), self.policy)

    def send(self, events: list[Event]) -> Cleaned:
        raw = json.dumps(body(self.fmt, events)).encode()
        cleaned = clean_body(
            raw, get_codec(self.fmt), {}, self.pool, ("p", self.policy), session="s"
        )
        assert cleaned.error is None and cleaned.report is not None, cleaned
        return cleaned

    def close(self) -> None:
        self.pool.close()


Opener = Callable[..., Session]


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[Opener]:
    """Opens a :class:`Session` in a format, with policy overrides (closed after the test);
    two opened are two proxies on one spill folder."""
    kept: list[Session] = []

    def open_one(fmt: str, **overrides: Any) -> Session:
        kept.append(Session(tmp_path, fmt, **overrides))
        return kept[-1]

    yield open_one
    for session in kept:
        session.close()


def spill_path(cleaned: Cleaned, call_id: str) -> str:
    """Where the budget step saved the output of ``call_id``."""
    assert cleaned.report is not None
    found = [
        a.detail["path"]
        for a in cleaned.report.actions
        if a.kind == "spilled" and a.tool_call_id == call_id
    ]
    assert found, cleaned.report.actions
    return str(found[0])


#: The reads of a spill file each agent makes: the format it speaks, its tool and how the
#: tool names the file.
READS = {
    "Read (Claude Code)": ("anthropic", "Bash", "Read", lambda path: {"file_path": path}),
    "sed -n in Bash (Claude Code)": (
        "anthropic",
        "Bash",
        "Bash",
        lambda path: {"command": f"sed -n '21,60p' {path}"},
    ),
    "cat in exec_command (Codex CLI)": (
        "responses",
        "exec_command",
        "exec_command",
        lambda path: {"cmd": f"cat {path}"},
    ),
    "head in shell, argv (Codex CLI)": (
        "responses",
        "shell",
        "shell",
        lambda path: {"command": ["bash", "-lc", f"head -n 60 {path} | tail -n 40"]},
    ),
    "read (opencode)": ("openai", "bash", "read", lambda path: {"filePath": path}),
    "read_file (Gemini CLI)": (
        "gemini",
        "run_shell_command",
        "read_file",
        lambda path: {"file_path": path, "start_line": 21, "end_line": 60},
    ),
}


@pytest.mark.parametrize("case", list(READS))
def test_a_read_of_the_spill_file_is_one_read_back_counted_once(opened: Opener, case: str) -> None:
    fmt, shell, reader, arguments = READS[case]
    session = opened(fmt)
    first = [user("Run the big command."), call("c1", shell, {"command": "big"}), result("c1", BIG)]
    ran = session.send(first)
    assert ran.readbacks == ()
    path = spill_path(ran, "c1")

    second = [*first, call("c2", reader, arguments(path)), result("c2", PART)]
    read = session.send(second)
    assert read.readbacks == (ReadBack("spill_file", reader, "budget", "c2", path, len(PART)),)

    # The same request again (a client's retry), and the next one: nothing new.
    assert session.send(second).readbacks == ()
    third = [*second, said("Read it back."), user("Go on."), call("c3", shell, {"command": "ls"}),
             result("c3", "a.txt\n")]  # fmt: skip
    assert session.send(third).readbacks == ()


def test_a_recall_through_the_proxys_url_is_a_read_back_of_kind_recall(
    opened: Opener,
) -> None:
    session = opened("anthropic", **{"recall.form": "url", "recall.url": "http://127.0.0.1:8787"})
    first = [user("Run it."), call("c1", "Bash", {"command": "big"}), result("c1", BIG)]
    ran = session.send(first)
    name = spill_path(ran, "c1").rsplit("/", 1)[1]
    url = f"http://127.0.0.1:8787/recall/s/{name}?offset=21&limit=40"
    second = [*first, call("c2", "Bash", {"command": f"curl -s '{url}'"}), result("c2", PART)]
    found = session.send(second).readbacks
    assert found == (ReadBack("recall", "Bash", "budget", "c2", spill_path(ran, "c1"), len(PART)),)


def test_reads_of_other_files_and_other_commands_are_not_read_backs(
    opened: Opener,
) -> None:
    session = opened("anthropic")
    first = [user("Run it."), call("c1", "Bash", {"command": "big"}), result("c1", BIG)]
    path = spill_path(session.send(first), "c1")
    folder = path.rsplit("/", 1)[0]
    second = [
        *first,
        call("c2", "Read", {"file_path": "/repo/src/app.py"}),
        call("c3", "Bash", {"command": f"ls {folder}"}),
        call("c4", "Bash", {"command": "sed -n '1,40p' /repo/src/app.py"}),
        result("c2", SOURCE),
        result("c3", "x.txt\n"),
        result("c4", SOURCE[:500]),
    ]
    assert session.send(second).readbacks == ()


#: Microcompaction at every turn, file reads protected for one turn only.
COMPACTING = {
    "microcompact.schedule.rewrite_cost": 0,
    "microcompact.truncate_turns": 1,
    "microcompact.summarize_turns": 1,
    "microcompact.reads.protect_turns": 1,
    "microcompact.reads.protect_tokens": 0,
    "microcompact.reads.protect_part_turns": 1,
    "microcompact.reads.protect_part_tokens": 0,
}


def read_and_work(reader: str, path: str, turns: int) -> list[Event]:
    """A read of ``path``, then ``turns`` turns of other work."""
    events = [user("Fix app.py."), call("r1", reader, {"file_path": path}), result("r1", SOURCE)]
    for i in range(turns):
        events += [call(f"w{i}", "Bash", {"command": f"echo {i}"}), result(f"w{i}", f"{i}\n")]
    return events


def work(session: Session, events: list[Event], turns: int) -> Cleaned:
    """``turns`` turns of other work added to ``events``, sent turn by turn as an agent
    sends them (none a read-back); the last request's cleaning."""
    sent = None
    for i in range(turns):
        events += [call(f"w{i}", "Bash", {"command": f"echo {i}"}), result(f"w{i}", f"{i}\n")]
        sent = session.send(events)
        assert sent.readbacks == ()
    assert sent is not None
    return sent


@pytest.mark.parametrize("fmt", ["anthropic", "gemini"])
def test_a_read_again_of_a_file_whose_read_was_compacted_is_one_read_back(
    opened: Opener, fmt: str
) -> None:
    reader = "Read" if fmt == "anthropic" else "read_file"
    session = opened(fmt, **COMPACTING)
    events = read_and_work(reader, "/repo/app.py", 0)
    sent = work(session, events, 4)
    assert any(a.tool_call_id == "r1" and a.step == "microcompact" for a in sent.report.actions), (
        sent.report.actions
    )  # type: ignore[union-attr]

    events += [call("r2", reader, {"file_path": "/repo/app.py"}), result("r2", SOURCE)]
    assert session.send(events).readbacks == (
        ReadBack("reread", reader, "microcompact", "r2", "/repo/app.py", len(SOURCE)),
    )
    # A third read follows a whole one: not a read-back.
    events += [
        call("w9", "Bash", {"command": "echo"}),
        result("w9", "\n"),
        call("r3", reader, {"file_path": "/repo/app.py"}),
        result("r3", SOURCE),
    ]
    assert session.send(events).readbacks == ()


def test_a_file_read_again_while_its_read_is_whole_is_not_a_read_back(
    opened: Opener,
) -> None:
    session = opened("anthropic", **COMPACTING)
    events = read_and_work("Read", "/repo/app.py", 0)
    session.send(events)
    # Read again at once: the first read is then superseded (and may be compacted in this
    # very request), but the model saw it whole.
    events += [call("r2", "Read", {"file_path": "/repo/app.py"}), result("r2", SOURCE)]
    assert session.send(events).readbacks == ()


def test_a_summarized_outputs_file_read_back_is_the_compactions(
    opened: Opener,
) -> None:
    session = opened("anthropic", **COMPACTING)
    medium = "".join(f"line {i}: {'z' * 60}\n" for i in range(60))  # under the cap
    events = [user("Go."), call("c1", "Bash", {"command": "medium"}), result("c1", medium)]
    sent = work(session, events, 4)
    compacted = [a for a in sent.report.actions if a.tool_call_id == "c1"]  # type: ignore[union-attr]
    assert compacted and compacted[-1].step == "microcompact", compacted
    path = str(compacted[-1].detail["path"])
    events += [call("c9", "Bash", {"command": f"cat {path}"}), result("c9", medium)]
    assert session.send(events).readbacks == (
        ReadBack("spill_file", "Bash", "microcompact", "c9", path, len(medium)),
    )


def test_a_restarted_proxy_counts_only_the_latest_turn(
    opened: Opener,
) -> None:
    """A conversation whose state is new (a restart, a forgotten state) does not count again
    the read-backs of its old turns: only those of its latest turn."""
    first = opened("anthropic")
    events = [user("Run it."), call("c1", "Bash", {"command": "big"}), result("c1", BIG)]
    path = spill_path(first.send(events), "c1")
    events += [call("c2", "Read", {"file_path": path}), result("c2", PART)]
    assert len(first.send(events).readbacks) == 1

    restarted = opened("anthropic")
    events += [
        said("Done."),
        user("Again."),
        call("c3", "Read", {"file_path": path}),
        result("c3", PART),
    ]
    found = restarted.send(events).readbacks
    assert [r.call_id for r in found] == ["c3"]


def test_a_failing_detection_never_fails_the_request(
    opened: Opener,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = opened("anthropic")

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no read-backs today")

    monkeypatch.setattr(readbacks_module.ReadBackWatch, "observe", broken)
    with caplog.at_level(logging.ERROR):
        cleaned = session.send(
            [user("Run it."), call("c1", "Bash", {"command": "b"}), result("c1", BIG)]
        )
    assert cleaned.readbacks == () and isinstance(cleaned.readback_error, RuntimeError)
    assert len(cleaned.body) < len(BIG)  # cleaned all the same
    assert "could not tell the read-backs" in caplog.text


@pytest.mark.parametrize(
    ("command", "files"),
    [
        ("cat /repo/a.py", ["/repo/a.py"]),
        ("cd /repo && sed -n '1,20p' src/a.py", ["/repo/src/a.py"]),
        ("head -n 50 a.log | tail -n 10", ["a.log"]),
        ("nl -ba a.py; tail -5 b.py", ["a.py", "b.py"]),
        ("grep -n def a.py", ["a.py"]),  # a search of one file prints lines of it
        ("sed -e 's/x/y/' a.py", []),  # prints the file changed: not what it holds
        ("cat a.py > b.py 2>/dev/null", []),  # prints nothing: copies it
        ("python3 -c 'print(1)'", []),
        ("cat 'unbalanced", []),
    ],
)
def test_a_shell_commands_reads_are_the_files_it_prints(command: str, files: list[str]) -> None:
    """The files a shell call reads are those its tool's declaration says
    (middleware.plugin.commands, one source with what microcompaction protects)."""
    bash = PluginHost.create(load_entrypoints=False).tool_file_access("Bash", [])
    assert bash is not None
    assert list(bash.use({"command": command}).files_read) == files


def test_a_file_whose_read_was_compacted_read_again_in_the_shell_is_a_read_back(
    opened: Opener,
) -> None:
    session = opened("anthropic", **COMPACTING)
    events = read_and_work("Read", "/repo/app.py", 0)
    work(session, events, 4)
    events += [
        call("s1", "Bash", {"command": "sed -n '1,80p' /repo/app.py"}),
        result("s1", SOURCE[:1500]),
    ]
    assert session.send(events).readbacks == (
        ReadBack("reread", "Bash", "microcompact", "s1", "/repo/app.py", 1500),
    )


def test_a_restarted_proxy_finds_the_read_before_it_when_the_file_is_read_again(
    opened: Opener,
) -> None:
    """The first read of the file came before the restart: a later read is told as a
    read-back from the compaction the new state saw, the first read found in the history."""
    events = read_and_work("Read", "/repo/app.py", 4)
    restarted = opened("anthropic", **COMPACTING)
    sent = restarted.send(events)  # its first request: r1 is compacted in it
    assert any(a.tool_call_id == "r1" for a in sent.report.actions)  # type: ignore[union-attr]
    events += [call("r2", "Read", {"file_path": "/repo/app.py"}), result("r2", SOURCE)]
    assert [(r.kind, r.call_id) for r in restarted.send(events).readbacks] == [("reread", "r2")]
