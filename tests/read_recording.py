"""What the real agent CLIs send when their model reads a file, recorded for
tests/recorded/<agent>-<version>-read.json.

Each CLI (tests/agents.py, set up as docs/proxy.md says) is pointed straight at the
provider stand-in, in a fresh home and a project holding a file of numbered lines, and
runs three times:

* the stand-in's model reads the file of :data:`LINES` lines whole with the CLI's own read
  tool (Codex CLI, which has none, with its shell), reads part of it (Codex: ``cat``), edits
  it quoting one of its lines with the CLI's edit tool, then answers with text;
* it reads a file of :data:`LONG_LINES` lines, past every CLI's own limit, to show the
  CLI's truncation of a read;
* the file is given with the prompt the CLI's own way (Claude Code's and Gemini CLI's
  ``@path``, ``opencode run -f``; Codex CLI has none), the model answering at once.

Every request the stand-in receives is kept (method, path with its query, headers but host
and content-length, body) and trimmed as the older recordings are (both by
tests/recording.py): strings over :data:`KEEP_CHARS` characters cut short with a marker, the
other tools' declarations cut to their names; while the read and edit tools' declarations,
the model's turns, the tool results (and in the third run whatever holds the file's text)
stay exactly as sent.

Recorded again, then checked, with ``CHATCLI_RECORD=1 python -m pytest
tests/test_recorded_reads.py`` (without the variable that module only checks the files).
"""

from __future__ import annotations

import datetime
import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_events import Event, events
from agents import AGENT_BY_NAME, Agent
from locations import RECORDED
from recording import (
    HISTORY,  # noqa: F401 (tests/test_recorded_reads.py's)
    KEEP_CHARS,
    Recorder,
    cut,
    model_item,
    run_cli,
    strings,
    tool_name,  # noqa: F401 (tests/test_recorded_reads.py's)
)
from recording import trim as trim_request
from servers import serving
from stand_in import FREEFORM, Call, Provider, Reply

#: The file the model reads: numbered lines of 72 characters, 300 of them (21,600
#: characters), and a long one past every CLI's own limit on one read.
FILE_NAME = "inventory.py"
LINES = 300
LONG_LINES = 3_000
#: The line the edit quotes (and changes).
EDITED = 150
PROMPT = f"Read {FILE_NAME}, then fix line {EDITED}."
LONG_PROMPT = f"Read {FILE_NAME}."
#: Where the partial read starts and how many lines it asks for.
PART = (120, 30)


def line(number: int) -> str:
    """Line ``number`` of the file (1-based; 72 characters with its line break)."""
    return f'ROW_{number:04d} = "row {number:04d} of the inventory, kept in stock: {"#" * 16}"\n'


def edited_line(number: int) -> str:
    return line(number).replace("kept in stock", "sold out")


def numbered_file(lines: int) -> str:
    return "".join(line(n) for n in range(1, lines + 1))


def after_edit() -> str:
    """The short file once the scripted edit is made."""
    return "".join(edited_line(n) if n == EDITED else line(n) for n in range(1, LINES + 1))


def _old_new() -> tuple[str, str]:
    return line(EDITED).rstrip("\n"), edited_line(EDITED).rstrip("\n")


# -- each CLI's read and edit ------------------------------------------------------------------


@dataclass(frozen=True)
class Reader:
    """One CLI's model reading and editing the file: the calls it makes (for the file at a
    path), the tools whose declarations are kept whole, and what the CLI is known to send
    back, which tests/test_recorded_reads.py checks the recording against."""

    agent: Agent
    #: The file's name: tests/recorded/<slug>-<version>-read.json.
    slug: str
    title: str
    calls: Callable[[Path], list[Call]]
    long_calls: Callable[[Path], list[Call]]
    kept_tools: tuple[str, ...]
    #: What the recording's ``how`` says of the calls.
    says: str
    #: Line ``number`` of text ``text`` as the read shows it.
    shown: Callable[[int, str], str]
    #: What the edit's result says when it worked.
    edit_said: str
    #: What the read of the long file says of its truncation.
    long_notice: str
    #: The prompt and options that give the file with the prompt, if the CLI can, and what
    #: the CLI writes before the file's text in the request.
    attach: tuple[str, tuple[str, ...], str] | None = None
    #: What the long run's ``how`` adds for this CLI.
    long_note: str = ""

    @property
    def path(self) -> Path:
        return RECORDED / f"{self.slug}-{self.agent.version}-read.json"


def _claude(path: Path) -> list[Call]:
    old, new = _old_new()
    return [
        Call("Read", {"file_path": str(path)}),
        Call("Read", {"file_path": str(path), "offset": PART[0], "limit": PART[1]}),
        Call("Edit", {"file_path": str(path), "old_string": old, "new_string": new}),
    ]


def _codex(path: Path) -> list[Call]:
    old, new = _old_new()
    patch = f"*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n*** End Patch\n"
    return [
        Call("exec_command", {"cmd": f"sed -n '1,{LINES}p' {path}"}),
        Call("exec_command", {"cmd": f"cat {path}"}),
        Call("apply_patch", {FREEFORM: patch}, freeform=True),
    ]


def _opencode(path: Path) -> list[Call]:
    old, new = _old_new()
    return [
        Call("read", {"filePath": str(path)}),
        Call("read", {"filePath": str(path), "offset": PART[0], "limit": PART[1]}),
        Call("edit", {"filePath": str(path), "oldString": old, "newString": new}),
    ]


def _gemini(path: Path) -> list[Call]:
    old, new = _old_new()
    end = PART[0] + PART[1] - 1
    return [
        Call("read_file", {"file_path": str(path)}),
        Call("read_file", {"file_path": str(path), "start_line": PART[0], "end_line": end}),
        Call(
            "replace",
            {
                "file_path": str(path),
                "instruction": f"Mark row {EDITED} sold out.",
                "old_string": old,
                "new_string": new,
            },
        ),
    ]


READERS = (
    Reader(
        agent=AGENT_BY_NAME["claude"],
        slug="claude-code",
        title="Claude Code",
        calls=_claude,
        long_calls=lambda path: [Call("Read", {"file_path": str(path)})],
        kept_tools=("Read", "Edit"),
        says="Read of the whole file, Read with offset and limit, Edit quoting a line",
        shown=lambda number, text: f"{number}\t{text}",
        edit_said="has been updated successfully",
        long_notice="[Truncated: PARTIAL view",
        attach=(f"Look at @{FILE_NAME}.", (), "Called the Read tool with the following input:"),
        long_note=(
            " Claude Code sized its page from a count_tokens request it made to the "
            "stand-in, which answers a quarter of the characters of the messages' JSON: "
            "with the real API the lines shown and the token counts in its notice differ."
        ),
    ),
    Reader(
        agent=AGENT_BY_NAME["codex"],
        slug="codex",
        title="Codex CLI",
        calls=_codex,
        long_calls=lambda path: [Call("exec_command", {"cmd": f"cat {path}"})],
        kept_tools=("exec_command", "apply_patch"),
        says=(
            f"exec_command running sed -n '1,{LINES}p' FILE, then exec_command running cat "
            "FILE (Codex CLI has no read tool), then its freeform apply_patch tool (a "
            "custom_tool_call) with a patch quoting a line"
        ),
        shown=lambda number, text: text,
        edit_said="Success. Updated the following files:",
        long_notice="tokens truncated…",
    ),
    Reader(
        agent=AGENT_BY_NAME["opencode"],
        slug="opencode",
        title="opencode",
        calls=_opencode,
        long_calls=lambda path: [Call("read", {"filePath": str(path)})],
        kept_tools=("read", "edit"),
        says="read of the whole file, read with offset and limit, edit quoting a line",
        shown=lambda number, text: f"{number}: {text}",
        edit_said="Edit applied successfully.",
        long_notice="(Output capped at 50 KB.",
        attach=(
            f"Look at {FILE_NAME}.",
            ("-f", FILE_NAME),
            "Called the Read tool with the following input:",
        ),
    ),
    Reader(
        agent=AGENT_BY_NAME["gemini"],
        slug="gemini-cli",
        title="Gemini CLI",
        calls=_gemini,
        long_calls=lambda path: [Call("read_file", {"file_path": str(path)})],
        kept_tools=("read_file", "replace"),
        says=(
            "read_file of the whole file, read_file with start_line and end_line, replace "
            "quoting a line"
        ),
        shown=lambda number, text: text,
        edit_said="Successfully modified file:",
        long_notice="IMPORTANT: The file content has been truncated.",
        attach=(f"Look at @{FILE_NAME}.", (), f"Content from @{FILE_NAME}:"),
    ),
)
READER_BY_SLUG = {reader.slug: reader for reader in READERS}


# -- the scripted model ------------------------------------------------------------------------


def script(fmt: str, calls: list[Call]) -> Callable[[str, dict[str, Any]], Reply]:
    """The model: after the prompt, the next of ``calls`` for each result that came back,
    then a text answer; a request without tools (a title made on the side) gets a short
    text."""

    def reply(_: str, body: dict[str, Any]) -> Reply:
        if not body.get("tools"):
            return Reply(text="Scripted session")
        seen = model_events(fmt, body)
        prompts = [i for i, e in enumerate(seen) if e.kind == "prompt" and FILE_NAME in e.text]
        if not prompts:
            return Reply(text="Nothing to do.")
        done = sum(1 for e in seen[prompts[-1] + 1 :] if e.kind == "result")
        if done < len(calls):
            return Reply(calls=(calls[done],))
        return Reply(text="Done: the file was read and edited." if len(calls) > 1 else "Seen.")

    return reply


def model_events(fmt: str, body: dict[str, Any]) -> list[Event]:
    """:func:`agent_events.events`, a Responses freeform call and its output counted too (the
    call's arguments ``{FREEFORM: input}``)."""
    if fmt != "responses" or not isinstance(body.get("input"), list):
        return events(fmt, body)
    plain = {"custom_tool_call": "function_call", "custom_tool_call_output": "function_call_output"}
    items = [
        {
            **item,
            "type": plain[item["type"]],
            "arguments": json.dumps({FREEFORM: item.get("input", "")}),
        }
        if isinstance(item, dict) and item.get("type") in plain
        else item
        for item in body["input"]
    ]
    return events(fmt, {**body, "input": items})


# -- recording ---------------------------------------------------------------------------------


@dataclass
class Recorded:
    """One run: the requests the stand-in received, the file's path and text at the end."""

    requests: list[dict[str, Any]]
    path: Path
    text: str


def run_once(
    reader: Reader,
    lines: int,
    calls: Callable[[Path], list[Call]],
    prompt: str,
    root: Path,
    *,
    options: tuple[str, ...] = (),
) -> Recorded:
    """``prompt`` to the CLI (with ``options``) in a fresh home and project under ``root``
    that holds the file of ``lines`` lines, the stand-in's model making ``calls``."""
    agent = reader.agent
    home, project = root / "home", root / "project"
    home.mkdir(parents=True)
    project.mkdir(parents=True)
    target = project / FILE_NAME
    target.write_text(numbered_file(lines), "utf-8")
    provider = Provider(script=script(agent.fmt, calls(target)), context_chars=10_000_000)
    recorder = Recorder(provider.app())
    with serving(recorder) as url:
        env = agent.configure(home, project, url)
        run_cli([*agent.argv(prompt, False), *options], project, env)
    assert not provider.refused, [reason for _, reason, _ in provider.refused]
    return Recorded(recorder.requests, target, target.read_text("utf-8"))


def command(reader: Reader, prompt: str, options: tuple[str, ...] = ()) -> str:
    """The command line a run used, the binary by its name."""
    argv = [*reader.agent.argv(prompt, False), *options]
    return " ".join([Path(argv[0]).name, *(repr(a) if " " in a else a for a in argv[1:])])


def record(reader: Reader, today: str | None = None) -> dict[str, Any]:
    """Run ``reader``'s CLI (see the module's docstring) and write its recording."""
    fmt, kept = reader.agent.fmt, reader.kept_tools
    with tempfile.TemporaryDirectory(prefix="chatcli-rec-") as folder:
        root = Path(folder)
        short = run_once(reader, LINES, reader.calls, PROMPT, root / "short")
        long = run_once(reader, LONG_LINES, reader.long_calls, LONG_PROMPT, root / "long")
        attached = None
        if reader.attach is not None:
            prompt, options, _ = reader.attach
            attached = run_once(
                reader, LINES, lambda _: [], prompt, root / "attached", options=options
            )
    recording: dict[str, Any] = {
        "agent": reader.title,
        "version": reader.agent.version,
        "recorded": today or datetime.date.today().isoformat(),
        "how": (
            f"{command(reader, PROMPT)}, set up as tests/agents.py does (docs/proxy.md's "
            f"setup) but pointed straight at the provider stand-in, in a fresh home and a "
            f"project holding {FILE_NAME}: {LINES} numbered lines of 72 characters "
            f"(tests/read_recording.py line()). The stand-in's model made one call per "
            f"turn: {reader.says}; then answered with text. Every request the stand-in "
            f"received, in order. Strings over {KEEP_CHARS} characters are cut short "
            "('…[N more characters, trimmed for the test]') and the other tools' "
            "declarations cut to their names, except the read and edit tools' "
            "declarations, the model's turns and the tool results, kept as they were "
            "sent. Recorded by tests/read_recording.py."
        ),
        "file": {
            "name": FILE_NAME,
            "path": str(short.path),
            "lines": LINES,
            "chars": len(numbered_file(LINES)),
            "edited_line": EDITED,
            "edited": short.text == after_edit(),
        },
        "requests": [trim(fmt, request, kept) for request in short.requests],
        "long_file": {
            "how": (
                f"{command(reader, LONG_PROMPT)} in a fresh home and project whose "
                f"{FILE_NAME} has {LONG_LINES} lines ({len(numbered_file(LONG_LINES))} "
                "characters): the model read it once with the same tool and no range "
                f"({reader.long_calls(Path('FILE'))[0].name}), then answered. In the "
                f"model's turns and the tool results, each run of more than {2 * ENDS} of "
                f"the file's lines is kept at its first and last {ENDS}, with a line "
                "'…[N lines of the file cut here for the test]…' between; every other "
                "line (the CLI's own notices and markers) is as it was sent; all else as "
                f"above.{reader.long_note}"
            ),
            "path": str(long.path),
            "lines": LONG_LINES,
            "requests": [trim(fmt, request, kept, long=True) for request in long.requests],
        },
    }
    if reader.attach is not None and attached is not None:
        prompt, options, _ = reader.attach
        recording["attached"] = {
            "how": (
                f"{command(reader, prompt, options)} in a fresh home and project holding "
                f"the same {LINES}-line {FILE_NAME}: the CLI puts the file's text in the "
                "request itself; the model answered at once. Whatever holds the file's "
                "text is kept whole; all else as above."
            ),
            "path": str(attached.path),
            "requests": [trim(fmt, request, kept, attached=True) for request in attached.requests],
        }
    reader.path.write_text(json.dumps(recording, indent=1, ensure_ascii=False) + "\n", "utf-8")
    return recording


# -- trimming ----------------------------------------------------------------------------------


#: A line of the file as a read shows it, whatever the CLI puts before it.
FILE_LINE = re.compile(r'^.*ROW_(\d{4}) = "row \1 of the inventory, kept in stock: #{16}"\n?$')
#: Of a run of more file lines than twice this in a long read, the first and last are kept.
ENDS = 5


def cut_lines(text: str) -> str:
    """``text`` with each run of more than ``2 * ENDS`` of the file's lines kept at its
    ends, a marker line saying how many were cut; every other line (a CLI's notice, its
    own truncation marker) kept as it is."""
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) > 2 * ENDS:
            gone = len(run) - 2 * ENDS
            out.extend(
                [*run[:ENDS], f"…[{gone} lines of the file cut here for the test]…\n", *run[-ENDS:]]
            )
        else:
            out.extend(run)
        run.clear()

    for one in text.splitlines(keepends=True):
        if FILE_LINE.match(one):
            run.append(one)
        else:
            flush()
            out.append(one)
    flush()
    return "".join(out)


def _holds_file(item: Any) -> bool:
    """Whether a string of ``item`` holds a line of the file."""
    found: list[bool] = []
    strings(item, lambda text: found.append(line(EDITED).rstrip("\n") in text) or text)
    return any(found)


def trim(
    fmt: str,
    request: dict[str, Any],
    kept: tuple[str, ...],
    *,
    long: bool = False,
    attached: bool = False,
) -> dict[str, Any]:
    """``request`` as the recording keeps it (the module's docstring, :func:`recording.trim`):
    in a ``long`` run the file's lines in what is kept are cut (:func:`cut_lines`); in an
    ``attached`` one each history item holding the file's text is kept whole too."""

    def item_cut(item: Any) -> Any:
        if model_item(fmt, item) or (attached and _holds_file(item)):
            return strings(item, cut_lines) if long else item
        return strings(item, cut)

    return trim_request(fmt, request, kept, item_cut)
