"""What a tool call reads: the file a file-reading tool names (as the plugins declare it,
:class:`~middleware.FileAccess`), or those a shell tool's command prints with a read
command (``cat``, ``sed -n``, ``head``, ``tail``...), for telling a read of a file again
(:mod:`.readbacks`). A command is read as a shell would split it, never run; one it
cannot read is no read.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from middleware.plugin.capabilities import FileAccess
from middleware.view import ToolCall

#: The agents' shell tools, and the argument holding the command.
SHELL_TOOLS = {
    "Bash": "command", "bash": "command", "shell": "command", "exec_command": "cmd",
    "run_shell_command": "command", "local_shell": "command",
}  # fmt: skip
#: Commands that print a file, and their options that take a value.
READ_COMMANDS = {
    "cat": "", "nl": "bvwsil", "sed": "efl", "head": "nc", "tail": "nc", "less": "", "more": "",
    "bat": "lrH",
}  # fmt: skip
#: Characters of a command read at most: a read is short (a long one writes a file).
MAX_COMMAND_CHARS = 4096
_READER = re.compile(r"(?:^|[\s;|&(/])(?:" + "|".join(READ_COMMANDS) + r")\s")
_REDIRECT = re.compile(r"[<>&]*[<>][<>&]*")
_OPERATORS = frozenset({"|", "||", "&&", ";", "&", "|&", "(", ")"})


def files_read(call: ToolCall, access: Callable[[str], FileAccess | None]) -> list[str]:
    """The files ``call`` reads: the one a file-reading tool names, or those a shell
    tool's command prints with a read command (``cat``, ``sed -n``, ``head``...)."""
    arguments = call.decoded_arguments
    told = access(call.name)
    if told is not None:
        path = told.path(arguments) if told.action == "read" else None
        return [path] if path is not None else []
    key = SHELL_TOOLS.get(call.name)
    if key is None or not isinstance(arguments, dict):
        return []
    command = arguments.get(key)
    if isinstance(command, list) and command and all(isinstance(w, str) for w in command):
        command = command[-1] if len(command) >= 3 and command[-2] in ("-c", "-lc") else (
            shlex.join(command))  # fmt: skip
    if not isinstance(command, str) or len(command) > MAX_COMMAND_CHARS:
        return []
    return shell_reads(command)


def shell_reads(command: str) -> list[str]:
    """The files a shell command prints with a read command (``cat a``, ``sed -n '1,9p'
    a``, ``head -n 5 a | tail -n 2``), in order; ``[]`` for anything it cannot read."""
    if _READER.search(command) is None:
        return []
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:  # unbalanced quotes
        return []
    found: list[str] = []
    segment: list[str] = []
    for word in [*words, ";"]:
        if word not in _OPERATORS:
            segment.append(word)
            continue
        found += _segment_reads(segment)
        segment = []
    return found


def _segment_reads(words: list[str]) -> list[str]:
    """The files one simple command prints, if it is a read command."""
    while words and "=" in words[0] and not words[0].startswith("="):
        words = words[1:]  # VAR=value before the command
    if not words:
        return []
    program = words[0].rsplit("/", 1)[-1]
    valued = READ_COMMANDS.get(program)
    if valued is None:
        return []
    operands: list[str] = []
    script_given = False
    skip = False
    for word in words[1:]:
        if skip:
            skip = False
            continue
        if word.startswith("-") and len(word) > 1:
            if word[1:2] in valued and program == "sed":
                script_given = True
            skip = len(word) == 2 and word[1] in valued
            continue
        if _REDIRECT.fullmatch(word):
            skip = True  # the file it redirects to or from
            if operands and operands[-1].isdigit():
                operands.pop()  # the descriptor before it (2>)
            continue
        operands.append(word)
    if program == "sed" and not script_given and operands:
        operands = operands[1:]  # the script
    return operands
