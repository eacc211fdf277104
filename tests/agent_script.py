"""The scripted model: the model's side of every scenario the agent tests play, decided from
the request alone (so concurrent sessions and resumed ones are played right), with each
agent's own tools (:class:`Tools`); the prompts that name the scenarios, and the outputs
of the commands it runs."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_events import Event, events
from stand_in import Call, Reply

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
#: gives, a first range of a few hundred lines, :func:`agents.codex_read`).
SOURCE_READ = f"sed -n '1,200p' {SOURCE_FILE}"
#: A command printing 200 lines of plain output, a little shorter than the 200 lines
#: :data:`SOURCE_READ` prints: no read of a file, a log as microcompaction sees it.
PLAIN_COMMAND = (
    "python3 -c \"import sys; sys.stdout.write(''.join('check %03d: ok\\n' % i "
    'for i in range(1, 201)))"'
)
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
    return (
        f"python3 -c \"import sys; sys.stdout.write(''.join('row %04d ' % i + '{letter}' * 90 "
        f'+ chr(10) for i in range(1, {lines + 1})))"'
    )


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
    followed = [
        i for i, e in enumerate(later) if (e.name, e.arguments) == (wanted.name, wanted.arguments)
    ]
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
