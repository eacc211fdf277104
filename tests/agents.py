"""The real agent CLIs through ``chatcli-mw serve``: where each is installed, how it is
pointed at the proxy (exactly as docs/proxy.md says), started and resumed, and a scripted
model that drives any of them through the same scenarios by what the requests say.

`.ci/run` installs the pinned npm packages into .cache/agents; a test of an agent that is
not installed skips and says how to install it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from locations import REPO
from stand_in import Call, Reply

#: Where `.ci/run` installs the agents (npm --prefix).
AGENTS = REPO / ".cache" / "agents"
#: The pinned versions `.ci/run` installs (the recorded requests in tests/recorded/ are
#: theirs).
PINNED = {"claude": "2.1.197", "codex": "0.171.0", "opencode": "1.18.33", "gemini": "0.61.0"}
NPM_PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "opencode": "opencode-ai",
    "gemini": "@google/gemini-cli",
}

#: The prompts the scripted model knows, each a scenario.
RUN_BIG = "Run the big command."
READ_AGAIN = "Read the big output again."
#: Runs the big command, then reads the file its preview names with the agent's own
#: file-reading tool (its shell, for an agent without one).
READ_FILE = "Run the big command and read its file."
SLEEP = "Start the slow command."
GO_ON = "Go on."
#: Runs :data:`SEVERAL` big commands, one a turn (printing ``a``, ``b``, ...), and ends on
#: their outputs whatever they hold (in observe mode the agent sees them whole: there is no
#: preview to follow).
RUN_SEVERAL = "Run several big commands."
SEVERAL = 6
#: Fills the context until the agent compacts it (its own compaction), then goes on.
FILL = "Fill the context, then go on."
#: Runs :data:`PLAIN_COMMAND`, reads :data:`SOURCE_FILE` with :data:`SOURCE_READ` in the
#: workdir the prompt names (``Workdir /path``), then runs short commands, one a turn, until
#: the read comes back compacted; then runs what its summary says to read it again, one
#: more command after that, and ends (:func:`_read_source`).
READ_SOURCE = "Read the source file with sed."
#: The source file of :data:`READ_SOURCE`, under the project (:func:`source_file`).
SOURCE_FILE = "src/inventory.py"
#: How Codex CLI's model reads a file (gpt-5.5 in the rollouts of
#: ../shared/data/trajectories/codex: ``sed -n`` on a path relative to the ``workdir`` it
#: gives, a first range of a few hundred lines, :func:`codex_read`).
SOURCE_READ = f"sed -n '1,200p' {SOURCE_FILE}"
#: A command printing 200 lines of plain output, a little shorter than the 200 lines
#: :data:`SOURCE_READ` prints: no read of a file, a log as microcompaction sees it.
PLAIN_COMMAND = ("python3 -c \"import sys; sys.stdout.write(''.join('check %03d: ok\\n' % i "
                 "for i in range(1, 201)))\"")  # fmt: skip
#: Short commands :data:`READ_SOURCE` runs at most while it waits for the read to be
#: compacted.
MAX_WAITING = 8
#: What :data:`READ_SOURCE` runs after reading the file again, and its answer then.
AFTER_READ_BACK = "echo after the read-back"
WENT_ON = "Read the file again and went on."
#: A tool output of 4,000 characters that are a token each (the stand-in counts every
#: punctuation mark as one): what takes a Codex session past the compaction limit the
#: compaction tests set, with room on either side (a request is ~9,000 tokens without it).
FILL_COMMAND = "python3 -c \"import sys; sys.stdout.write('.' * 4000)\""
#: Codex's auto-compaction limit for the compaction tests (tokens, as the stand-in counts
#: them): a request of their session is ~9,000 without the :data:`FILL_COMMAND` output and
#: ~13,000 with it.
CODEX_COMPACT_AT = 11_000
#: How Codex CLI starts the user message that replaces a history it compacted itself (under a
#: provider not named ``OpenAI``), before the summary the model wrote in a turn of its own.
CODEX_SUMMARY = "Another language model started to solve this problem"

#: What the preview says to run to read lines back (path form), or to ask Read for.
SHELL_READ = re.compile(r"read them with `([^`]+)`")
READ_TOOL = re.compile(
    r"read them with the Read tool \(file_path (.+?), offset (\d+), limit (\d+)\)"
)
LINES_SAID = re.compile(r"Lines (\d+)-(\d+) of (\d+) are not shown")
#: The spill file a preview names.
SAVED_TO = re.compile(r"saved to:? (\S+?)\]?\n")


def big_output(letter: str, lines: int = 80) -> str:
    """The output of :func:`big_command`: numbered lines of 100 characters."""
    return "".join(f"row {i:04d} {letter * 90}\n" for i in range(1, lines + 1))


def source_file(lines: int = 300) -> str:
    """The text of :data:`SOURCE_FILE`: Python functions of four lines, each raising a
    ``ValueError`` (lines a summary of a command's output would quote as errors)."""
    return "".join(
        f"def check_{i:03d}(r):\n    if r < 0:\n        raise ValueError(r)\n    return r\n"
        for i in range(1, lines // 4 + 1)
    )


def plain_output() -> str:
    """What :data:`PLAIN_COMMAND` prints."""
    return "".join(f"check {i:03d}: ok\n" for i in range(1, 201))


def big_command(letter: str, lines: int = 80) -> str:
    """A shell command printing :func:`big_output` (8,000 characters by default: over the
    default cap, under the limits the agents apply themselves, Codex CLI's 10,000)."""
    return (f"python3 -c \"import sys; sys.stdout.write(''.join('row %04d ' % i + '{letter}' * 90 "
            f"+ chr(10) for i in range(1, {lines + 1})))\"")  # fmt: skip


def binary(name: str) -> Path:
    """The installed CLI ``name`` (``claude``, ``codex``, ``opencode``); the environment
    variable ``CHATCLI_TEST_<NAME>`` names another binary."""
    return Path(os.environ.get(f"CHATCLI_TEST_{name.upper()}",
                               AGENTS / "node_modules" / ".bin" / name))  # fmt: skip


def missing(name: str) -> str | None:
    """Why the agent ``name`` cannot run here, or ``None``."""
    path = binary(name)
    if not path.exists():
        return (f"{name} is not installed at {path}: npm install --prefix .cache/agents "
                f"{NPM_PACKAGES[name]}@{PINNED[name]} (.ci/run does)")  # fmt: skip
    return None


# -- what a request body says, in any wire format ------------------------------------------


@dataclass(frozen=True)
class Event:
    """One step of a conversation as the model sees it: a typed ``prompt``, a tool
    ``call`` (its name and arguments), a tool ``result`` (its text) or a ``compaction``
    (a Responses ``compaction`` item, an Anthropic ``compaction`` block, the summary Codex
    CLI wrote in place of a history it compacted locally: the agent's own compaction of what
    came before)."""

    kind: str
    text: str = ""
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text(block.get("text", block.get("content", ""))) if isinstance(block, dict)
                       else str(block) for block in content)  # fmt: skip
    return "" if content is None else json.dumps(content)


def events(fmt: str, body: dict[str, Any]) -> list[Event]:
    """The prompts, calls and results of a request body, in order."""
    out: list[Event] = []
    if fmt == "gemini":
        return _gemini_events(body)
    history = body.get("input" if fmt == "responses" else "messages") or []
    for item in history if isinstance(history, list) else []:
        if fmt == "responses":
            kind = item.get("type", "message")
            if kind == "function_call":
                out.append(
                    Event("call", name=item["name"], arguments=json.loads(item["arguments"]))
                )
            elif kind == "function_call_output":
                out.append(Event("result", _text(item.get("output"))))
            elif kind == "message" and item.get("role") == "user":
                typed = _text(item.get("content"))
                local = typed.startswith(CODEX_SUMMARY)  # Codex compacted it itself
                out.append(Event("compaction") if local else Event("prompt", typed))
            elif kind == "compaction":
                out.append(Event("compaction"))
            continue
        role, content = item.get("role"), item.get("content")
        if fmt == "openai":
            if role == "tool":
                out.append(Event("result", _text(content)))
            elif role == "user":
                out.append(Event("prompt", _text(content)))
            for call in item.get("tool_calls") or []:
                function = call["function"]
                out.append(Event("call", name=function["name"],
                                 arguments=json.loads(function["arguments"] or "{}")))  # fmt: skip
            continue
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        typed = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        if role == "user" and typed:
            out.append(Event("prompt", typed))
        for block in blocks:
            if block.get("type") == "tool_use":
                out.append(Event("call", name=block["name"], arguments=block.get("input") or {}))
            elif block.get("type") == "tool_result":
                out.append(Event("result", _text(block.get("content"))))
            elif block.get("type") == "compaction":
                out.append(Event("compaction"))
    return out


def _gemini_events(body: dict[str, Any]) -> list[Event]:
    out: list[Event] = []
    for content in body.get("contents") or []:
        parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
        typed = "".join(p["text"] for p in parts if "text" in p and not p.get("thought"))
        if content.get("role", "user") == "user" and typed:
            out.append(Event("prompt", typed))
        for part in parts:
            if "functionCall" in part:
                call = part["functionCall"]
                out.append(Event("call", name=call["name"], arguments=call.get("args") or {}))
            elif "functionResponse" in part:
                response = part["functionResponse"].get("response") or {}
                said = response.get("output", response.get("error"))
                out.append(Event("result", said if isinstance(said, str) else json.dumps(response)))
    return out


def results(fmt: str, body: dict[str, Any]) -> list[str]:
    return [e.text for e in events(fmt, body) if e.kind == "result"]


def without_results(fmt: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with every tool result taken out."""
    out = copy.deepcopy(body)
    if fmt == "gemini":
        for content in out["contents"]:
            content["parts"] = [p for p in content["parts"] if "functionResponse" not in p]
        out["contents"] = [c for c in out["contents"] if c["parts"]]
        return out
    if fmt == "responses":
        out["input"] = [i for i in out["input"] if i.get("type") != "function_call_output"]
        return out
    for message in out["messages"]:
        if isinstance(message.get("content"), list):
            message["content"] = [b for b in message["content"]
                                  if b.get("type") != "tool_result"]  # fmt: skip
    out["messages"] = [m for m in out["messages"] if m.get("content") != []]
    return out


# -- the scripted model ----------------------------------------------------------------------


@dataclass(frozen=True)
class Tools:
    """How the scripted model runs a shell command and reads a file with one agent's own
    tools (their names and arguments as the agent declares them)."""

    shell: Callable[[str], Call]
    read: Callable[[str, int, int], Call] | None = None
    #: A command run in a working directory, with the arguments the agent's model gives
    #: a read (``None``: the agent's shell takes no working directory).
    shell_in: Callable[[str, str], Call] | None = None


def follow(preview: str, tools: Tools) -> Call:
    """The call an agent makes following only the words of ``preview``."""
    said = READ_TOOL.search(preview)
    if said is not None and tools.read is not None:
        return tools.read(said.group(1), int(said.group(2)), int(said.group(3)))
    command = SHELL_READ.search(preview)
    if command is None:
        raise AssertionError(f"the preview does not say how to read the rest:\n{preview[:3000]}")
    return tools.shell(command.group(1))


def read_file(preview: str, tools: Tools) -> Call:
    """The call reading the first lines ``preview`` does not show from the file it names,
    with the agent's file-reading tool (else as the preview says)."""
    saved, said = SAVED_TO.search(preview), LINES_SAID.search(preview)
    if tools.read is None or saved is None or said is None:
        return follow(preview, tools)
    return tools.read(saved.group(1), int(said.group(1)), 40)


def scripted(tools: Tools, fmt: str) -> Callable[[str, dict[str, Any]], Reply]:
    """The model's side of every scenario, decided from the request alone (so concurrent
    sessions and resumed ones are played right): the last typed prompt names the scenario,
    the tool results after it say how far it went."""

    def script(_: str, body: dict[str, Any]) -> Reply:
        if not body.get("tools"):  # a title or summary request the agent makes on the side
            return Reply(text="Scripted session")
        seen = events(fmt, body)
        prompts = [i for i, e in enumerate(seen) if e.kind == "prompt" and _scenario(e.text)]
        if not prompts:
            return Reply(text="Nothing to do.")
        start = prompts[-1]
        scenario = _scenario(seen[start].text)
        after = [e for e in seen[start + 1 :] if e.kind == "result"]
        letter = _letter(seen[start].text)
        if scenario == RUN_BIG:
            if not after:
                return Reply(calls=(tools.shell(big_command(letter)),))
            if len(after) == 1:
                return Reply(calls=(follow(after[0].text, tools),))
            return Reply(text="Read it back.")
        if scenario == READ_FILE:
            if not after:
                return Reply(calls=(tools.shell(big_command(letter)),))
            if len(after) == 1:
                return Reply(calls=(read_file(after[0].text, tools),))
            return Reply(text="Read its file.")
        if scenario == RUN_SEVERAL:
            if len(after) < SEVERAL:
                return Reply(calls=(tools.shell(big_command(chr(ord("a") + len(after)))),))
            return Reply(text="Ran them.")
        if scenario == READ_AGAIN:
            if not after:
                first = next(e.text for e in seen if e.kind == "result")
                return Reply(calls=(follow(first, tools),))
            return Reply(text="Read it again.")
        if scenario == FILL:
            return _fill(seen[start + 1 :], tools)
        if scenario == READ_SOURCE:
            return _read_source(seen[start].text, seen[start + 1 :], tools)
        if scenario == SLEEP:
            if after:  # the agent ran it after all (it was not killed in time)
                return Reply(text="The slow command ended.")
            marker = re.search(r"marker ([^\s\"']+)", seen[start].text)
            assert marker is not None
            return Reply(calls=(tools.shell(f"touch {marker.group(1)} && sleep 300"),))
        return Reply(text="Went on.")

    return script


def _fill(since: list[Event], tools: Tools) -> Reply:
    """The model's side of :data:`FILL`: the filling output, one more call (an agent
    compacting in the middle of a turn does it before the request that would answer it),
    then, once the history holds the agent's compaction, a call made after it and an
    answer."""
    compactions = [i for i, e in enumerate(since) if e.kind == "compaction"]
    if compactions:
        if not any(e.kind == "result" for e in since[compactions[-1] + 1 :]):
            return Reply(calls=(tools.shell("echo after compaction"),))
        return Reply(text="Went on after the compaction.")
    done = [e for e in since if e.kind == "result"]
    if not done:
        return Reply(calls=(tools.shell(FILL_COMMAND),))
    if len(done) == 1:
        return Reply(calls=(tools.shell("echo before compaction"),))
    return Reply(text="The context was never compacted.")


#: What a cut or compacted read says to do to read its file again: the tool, and the
#: arguments to give it (``name: value``, each value in JSON).
READ_IT_AGAIN = re.compile(r"read it again with (\S+?)(?: \((.*?)\))? before acting on it")
_SAID_ARGUMENT = re.compile(r'(\w+): ("(?:[^"\\]|\\.)*"|[^,]*)(?:, |$)')


def read_it_again(text: str) -> Call | None:
    """The call a cut or compacted read says to make to read its file again (for a shell
    read, the command that read it, in its working directory), or ``None``."""
    said = READ_IT_AGAIN.search(text)
    if said is None:
        return None
    given = said.group(2) or ""
    arguments = {name: json.loads(value) for name, value in _SAID_ARGUMENT.findall(given)}
    return Call(said.group(1), arguments)


def _read_source(prompt: str, since: list[Event], tools: Tools) -> Reply:
    """The model's side of :data:`READ_SOURCE` (``since``: the calls and results after
    its prompt): the plain command, the read, short commands until the read's result
    says how to read it again, that command, one more, an answer."""
    workdir = re.search(r"Workdir (\S+)", prompt)
    assert workdir is not None and tools.shell_in is not None, prompt
    done = [e for e in since if e.kind == "result"]
    if not done:
        return Reply(calls=(tools.shell(PLAIN_COMMAND),))
    if len(done) == 1:
        return Reply(calls=(tools.shell_in(SOURCE_READ, workdir.group(1)),))
    wanted = read_it_again(done[1].text)
    if wanted is None:  # the read is whole yet
        if len(done) - 2 < MAX_WAITING:
            return Reply(calls=(tools.shell(f"echo waiting {len(done) - 1}"),))
        return Reply(text="The read was never compacted.")
    later = [e for e in since if e.kind == "call"][2:]
    followed = [i for i, e in enumerate(later)
                if (e.name, e.arguments) == (wanted.name, wanted.arguments)]  # fmt: skip
    if not followed:
        return Reply(calls=(wanted,))
    if len(later) == followed[0] + 1:
        return Reply(calls=(tools.shell(AFTER_READ_BACK),))
    return Reply(text=WENT_ON)


def _scenario(text: str) -> str | None:
    """The last scenario ``text`` names (Gemini CLI sends a resumed session's new prompt
    in the same content as the old one, when no model turn came between them)."""
    prompts = (RUN_BIG, READ_AGAIN, READ_FILE, SLEEP, GO_ON, FILL, RUN_SEVERAL, READ_SOURCE)
    found = {prompt: text.rfind(prompt) for prompt in prompts}
    last = max(found, key=lambda prompt: found[prompt])
    return last if found[last] >= 0 else None


def _letter(prompt: str) -> str:
    """Concurrent sessions print different letters: ``Run the big command. (b)``."""
    found = re.search(r"\(([a-z])\)", prompt)
    return found.group(1) if found else "y"


# -- running a CLI ----------------------------------------------------------------------------


@dataclass
class Run:
    """One run of an agent CLI."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]
    process: subprocess.Popen[str] | None = None
    stdout: str = ""
    stderr: str = ""

    def start(self) -> Run:
        self.process = subprocess.Popen(
            self.argv, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        return self

    def wait(self, timeout: float = 300) -> Run:
        assert self.process is not None
        try:
            self.stdout, self.stderr = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        return self

    def kill(self) -> None:
        """Kill the agent and every process it started (a tool it is running)."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.stdout, self.stderr = self.process.communicate(timeout=60)

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.returncode

    def explain(self) -> str:
        argv = " ".join(self.argv)
        return f"{argv}\nexit {self.returncode}\n{self.stdout[-2000:]}\n{self.stderr[-3000:]}"


def wait_for_file(path: Path, seconds: float = 120) -> bool:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def base_env(home: Path) -> dict[str, str]:
    """A clean environment: its own HOME, this Python's folder first on PATH (the
    scripted commands run python3), no telemetry or update checks. Gemini CLI is not
    started twice: it starts itself again in a child process only to raise its heap limit
    (``GEMINI_CLI_NO_RELAUNCH``: a second of CPU per run)."""
    python = Path(shutil.which("python3") or "/usr/bin/python3").parent
    node = Path(shutil.which("node") or "/usr/bin/node").parent
    return {
        "PATH": f"{python}:{node}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "GEMINI_CLI_NO_RELAUNCH": "true",
    }


def recorded_files(root: Path) -> Iterator[Path]:
    """The spill files under a store root."""
    yield from sorted(root.glob("chatcli-agent-*/tool-results/*"))


# -- the agents, set up as docs/proxy.md says ----------------------------------------------


@dataclass(frozen=True)
class Agent:
    """One agent CLI: the wire format it speaks, its tools, how it is pointed at the proxy
    and how it is started and resumed."""

    #: The scenario's name: the CLI, and the provider when it can talk to several.
    name: str
    #: The CLI (``claude``, ``codex``, ``opencode``).
    cli: str
    fmt: str
    tools: Tools
    configure: Callable[[Path, Path, str], dict[str, str]]
    argv: Callable[[str, bool], list[str]]
    #: A command that sets up the agent's own state once (a user's first run does), so
    #: that two sessions started at once do not race to create it.
    prepare: tuple[str, ...] = ()
    #: The variable that moves the agent's own session store, for an agent whose store
    #: two runs at once cannot share: opencode's SQLite database fails the second writer
    #: with "database is locked" (anomalyco/opencode#33320, #47566), and the workaround
    #: its users run is a store per run.
    store_env: str | None = None

    @property
    def version(self) -> str:
        return PINNED[self.cli]


def _claude_env(home: Path, project: Path, url: str) -> dict[str, str]:
    """Claude Code's environment as docs/proxy.md sets it (``ANTHROPIC_BASE_URL``)."""
    said = re.search(r"ANTHROPIC_BASE_URL=(\S+) claude", documented("Claude Code", "sh"))
    assert said is not None, "docs/proxy.md no longer says how to point Claude Code"
    return {
        **base_env(home),
        "ANTHROPIC_BASE_URL": said.group(1).replace(DOCUMENTED_URL, url),
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "IS_SANDBOX": "1",  # root may skip permission prompts in a sandbox
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def _claude_argv(prompt: str, resume: bool) -> list[str]:
    return [str(binary("claude")), *(["-c"] if resume else []), "-p", prompt,
            "--dangerously-skip-permissions", "--model", "claude-stand-in",
            "--output-format", "text"]  # fmt: skip


#: Where the setups the tests run are written for users.
PROXY_DOCS = REPO / "docs" / "proxy.md"
#: The address the setups in docs/proxy.md name (the default of ``chatcli-mw serve``).
DOCUMENTED_URL = "http://127.0.0.1:8787"


def documented(heading: str, language: str) -> str:
    """The first ``language`` code block after ``### heading`` in docs/proxy.md: the
    tests configure each agent with exactly what users are told to write."""
    text = PROXY_DOCS.read_text("utf-8")
    section = text.split(f"\n### {heading}\n", 1)[1]
    return section.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def _codex_env(home: Path, project: Path, url: str) -> dict[str, str]:
    """``~/.codex/config.toml`` with the proxy as a model provider, as docs/proxy.md says
    (Codex CLI 0.171 ignores ``OPENAI_BASE_URL`` for its built-in provider)."""
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    config = documented("Codex CLI", "toml").replace(DOCUMENTED_URL, url)
    (home / ".codex" / "config.toml").write_text(config, "utf-8")
    return {**base_env(home), "OPENAI_API_KEY": "sk-test"}


def codex_read(command: str, workdir: str) -> dict[str, Any]:
    """The arguments of an ``exec_command`` reading a file as Codex CLI's model gives them
    (gpt-5.5 in the rollouts of ../shared/data/trajectories/codex: 1,771 of their 2,076
    ``exec_command`` calls give these four)."""
    return {"cmd": command, "workdir": workdir, "yield_time_ms": 10000, "max_output_tokens": 40000}


def _codex_argv(prompt: str, resume: bool) -> list[str]:
    return [str(binary("codex")), "exec", *(["resume", "--last"] if resume else []),
            "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
            prompt]  # fmt: skip


def _opencode(provider: str, model: str, key: str) -> Callable[[Path, Path, str], dict[str, str]]:
    """``opencode.json`` in the project as docs/proxy.md says, using ``model`` of
    ``provider``."""

    def configure(home: Path, project: Path, url: str) -> dict[str, str]:
        config = json.loads(documented("opencode", "json").replace(DOCUMENTED_URL, url))
        config.update({"model": f"{provider}/{model}", "autoupdate": False, "share": "disabled"})
        (project / "opencode.json").write_text(json.dumps(config, indent=2), "utf-8")
        return {**base_env(home), key: "sk-test"}

    return configure


def _opencode_argv(prompt: str, resume: bool) -> list[str]:
    return [str(binary("opencode")), "run", *(["-c"] if resume else []), prompt]


def _gemini_env(home: Path, project: Path, url: str) -> dict[str, str]:
    """``~/.gemini/settings.json`` as docs/proxy.md says, with what keeps the CLI offline
    (no usage statistics to play.googleapis.com, no update checks, no IDE), and
    ``GOOGLE_GEMINI_BASE_URL``."""
    settings = json.loads(documented("Gemini CLI", "json"))
    settings.update({
        "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "ide": {"enabled": False},
    })  # fmt: skip
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings), "utf-8")
    said = documented_variables("Gemini CLI", "gemini")
    assert "GOOGLE_GEMINI_BASE_URL" in said, "docs/proxy.md no longer says how to point Gemini CLI"
    said = {name: value.replace(DOCUMENTED_URL, url) for name, value in said.items()}
    return {**base_env(home), **said, "GEMINI_API_KEY": "test-key"}


def documented_variables(heading: str, command: str) -> dict[str, str]:
    """The variables the line that runs ``command`` sets, in the first ``sh`` block after
    ``### heading`` in docs/proxy.md (a value of ``...`` is the user's to fill in)."""
    for line in documented(heading, "sh").splitlines():
        words = line.split("#", 1)[0].split()
        if command in words:
            assigned = words[: words.index(command)]
            return dict(word.split("=", 1) for word in assigned if "=" in word)
    raise AssertionError(f"docs/proxy.md's {heading} setup no longer runs {command}")


def _gemini_argv(prompt: str, resume: bool) -> list[str]:
    return [*gemini_routed_argv(prompt, resume), "-m", "gemini-2.5-pro"]


def gemini_routed_argv(prompt: str, resume: bool = False) -> list[str]:
    """Gemini CLI as a user runs it, with no ``-m``: on its default model (``auto``) it
    asks a small model first, without tools, which model each prompt needs (its model
    router), then sends the prompt to the one chosen."""
    return [str(binary("gemini")), *(["--resume", "latest"] if resume else []), "-p", prompt,
            "--yolo", "-o", "json"]  # fmt: skip


#: What Gemini CLI's model router asks for (its schema): a simple prompt, for a flash model.
ROUTER_ANSWER = '{"complexity_reasoning": "One command.", "complexity_score": 10}'


Script = Callable[[str, dict[str, Any]], Reply]


def routed(script: Script) -> Script:
    """``script``, answering Gemini CLI's model router as its schema says (a call without
    tools whose system instruction is the router's)."""

    def answer(fmt: str, body: dict[str, Any]) -> Reply:
        said = json.dumps(body.get("systemInstruction", ""))
        if fmt == "gemini" and not body.get("tools") and "Routing" in said:
            return Reply(text=ROUTER_ANSWER)
        return script(fmt, body)

    return answer


GEMINI_TOOLS = Tools(
    shell=lambda command: Call("run_shell_command", {"command": command, "description": "run"}),
    read=lambda path, offset, limit: Call(
        "read_file", {"file_path": path, "start_line": offset, "end_line": offset + limit - 1}
    ),
)
OPENCODE_TOOLS = Tools(
    shell=lambda command: Call("bash", {"command": command, "description": "run"}),
    read=lambda path, offset, limit: Call("read", {"filePath": path, "offset": offset,
                                                   "limit": limit}),
)  # fmt: skip

AGENT_LIST = (
    Agent(
        "claude",
        "claude",
        "anthropic",
        Tools(
            shell=lambda command: Call("Bash", {"command": command, "description": "run"}),
            read=lambda path, offset, limit: Call(
                "Read", {"file_path": path, "offset": offset, "limit": limit}
            ),
        ),
        _claude_env,
        _claude_argv,
    ),
    Agent(
        "codex",
        "codex",
        "responses",
        Tools(
            shell=lambda command: Call("exec_command", {"cmd": command}),
            shell_in=lambda command, workdir: Call("exec_command", codex_read(command, workdir)),
        ),
        _codex_env,
        _codex_argv,
    ),
    Agent(
        "opencode",
        "opencode",
        "anthropic",
        OPENCODE_TOOLS,
        _opencode("anthropic", "claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        _opencode_argv,
        prepare=("session", "list"),  # creates its database
        store_env="XDG_DATA_HOME",
    ),
    Agent(
        "opencode-openai",
        "opencode",
        "responses",
        OPENCODE_TOOLS,
        _opencode("openai", "gpt-5", "OPENAI_API_KEY"),
        _opencode_argv,
        prepare=("session", "list"),
        store_env="XDG_DATA_HOME",
    ),
    Agent(
        "gemini",
        "gemini",
        "gemini",
        GEMINI_TOOLS,
        _gemini_env,
        _gemini_argv,
    ),
)
AGENT_BY_NAME = {agent.name: agent for agent in AGENT_LIST}
