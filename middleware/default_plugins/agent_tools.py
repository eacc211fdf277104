"""The well-known coding agents' file tools, declared as a third-party tool plugin would.

A file read is what an agent acts on next: an edit quotes lines of it. So a read is
bounded by the read tool itself, not by the generic per-result cap (Claude Code never
persists its ``Read``: the tool bounds its own output), and microcompaction keeps it in
the protected window until the file is read again or written. The agents' own bounds:

* Claude Code ``Read``: 2,000 lines, at most 25,000 tokens (about 100,000 characters);
  ``Write`` replaces a whole file, ``Edit`` and ``MultiEdit`` change it;
* opencode ``read``: 2,000 lines or 50 KB (its cap, 80,000, is ChatCLI's ``read``: the
  two share the name); ``write`` replaces a whole file, ``edit`` changes it;
* Gemini CLI ``read_file`` (2,000 lines of at most 2,000 characters) and
  ``read_many_files`` (the files its ``include`` globs match); ``write_file`` and
  ``replace`` change a file;
* Codex CLI's ``apply_patch`` changes every file its patch names.

Agents also read through their shell: Codex CLI's ``exec_command`` (``cmd``, from
``workdir``), ``shell`` (an argument vector) and ``shell_command``, the Responses API's
``local_shell``, Claude Code's ``Bash`` and ``PowerShell``, opencode's and SWE-agent's
``bash``, Gemini CLI's ``run_shell_command`` (from ``directory``), and the text-protocol
agents (mini-swe-agent's ``bash`` observations, SWE-agent's actions), whose command is
the code block of the model's answer. A command that prints a file (``sed -n '1,200p'
f``, ``cat f``, ``Get-Content f``) is a read of it, one that writes a file (``sed -i``,
``> f``, ``apply_patch``) a write (:mod:`middleware.plugin.commands`).

A policy's ``tools.<name>`` entry still wins over these caps.

The tools' roles (read, write, edit, execute: :data:`TOOL_ROLES`) are declared here and
nowhere else: the policy schema's default ``microcompact.inputs.tools`` and
``microcompact.exempt_tools`` are the lists :func:`input_clearing_tools` and
:func:`exempt_tools` give (tests/steps/test_tool_roles.py checks them, and the docs' lists).
"""

from __future__ import annotations

from typing import Literal

from middleware.plugin.capabilities import FileAccess, ToolCap
from middleware.plugin.markers import hookimpl

#: What a tool does: reads files, writes whole files, edits parts of them, or executes.
Role = Literal["read", "write", "edit", "execute"]

#: What a read tool returns at most, in characters: the tool's own bound.
READ_TOOL_CAPS: dict[str, int] = {
    "Read": 100_000,
    "read_file": 100_000,
    "read_many_files": 100_000,
}


def _shell(command: str, workdir: str | None = None) -> FileAccess:
    """A shell tool running the POSIX command line ``command`` from ``workdir``."""
    return FileAccess(
        "shell", command_arguments=(command,), workdir_arguments=(workdir,) if workdir else ()
    )


FILE_TOOLS: dict[str, FileAccess] = {
    "Read": FileAccess("read", ("file_path",), ("offset", "limit", "pages")),
    "read": FileAccess("read", ("filePath", "file_path"), ("offset", "limit")),
    "read_file": FileAccess(
        "read",
        ("file_path", "absolute_path", "path"),
        ("start_line", "end_line", "offset", "limit"),
    ),
    "read_many_files": FileAccess("read", ("include",)),
    "Write": FileAccess("write", ("file_path",)),
    "write": FileAccess("write", ("filePath", "file_path")),
    "write_file": FileAccess("write", ("file_path", "path")),
    "Edit": FileAccess("edit", ("file_path",)),
    "MultiEdit": FileAccess("edit", ("file_path",)),
    "edit": FileAccess("edit", ("filePath", "file_path")),
    "replace": FileAccess("edit", ("file_path",)),
    "apply_patch": FileAccess("patch", patch_arguments=("input", "patch")),
    "exec_command": _shell("cmd", "workdir"),
    "shell": _shell("command", "workdir"),
    "shell_command": _shell("command", "workdir"),
    "local_shell": _shell("command", "working_directory"),
    "Bash": _shell("command"),
    "PowerShell": FileAccess("shell", command_arguments=("command",), dialect="powershell"),
    "bash": _shell("command", "workdir"),
    "run_shell_command": _shell("command", "directory"),
    "swe_agent_action": _shell("command"),
}

#: The role of each kind of file access: a patch edits files (and may add or delete some),
#: a shell executes.
ROLE_OF_ACCESS: dict[str, Role] = {
    "read": "read", "write": "write", "edit": "edit", "patch": "edit", "shell": "execute",
}  # fmt: skip

#: Tools with a role but no file access declared: Claude Code's ``NotebookEdit``, and the
#: generic names ChatCLI's docs' promise is about ("results from write and execution tools
#: are preserved"; docs/microcompact.md, "Deliberate differences from ChatCLI").
OTHER_TOOLS: dict[str, Role] = {
    "NotebookEdit": "edit", "write": "write", "edit": "edit", "patch": "edit",
    "exec": "execute", "execute": "execute",
}  # fmt: skip

#: Every known tool's role.
TOOL_ROLES: dict[str, Role] = {
    **{name: ROLE_OF_ACCESS[access.action] for name, access in FILE_TOOLS.items()},
    **OTHER_TOOLS,
}


def input_clearing_tools() -> frozenset[str]:
    """The tools whose old inputs microcompaction clears by default: those that write or
    edit files, whose inputs hold the text written."""
    return frozenset(name for name, role in TOOL_ROLES.items() if role in ("write", "edit"))


def exempt_tools() -> frozenset[str]:
    """The tools whose results microcompaction leaves by default: those that write or edit
    files (their results are short confirmations), and the generic execute tools of
    ChatCLI's promise. An agent's own shell tool is not one: its output is what compaction
    is for."""
    generic = {name for name, role in OTHER_TOOLS.items() if role == "execute"}
    return input_clearing_tools() | generic


@hookimpl(trylast=True)
def tool_result_cap(tool_name: str) -> ToolCap | None:
    chars = READ_TOOL_CAPS.get(tool_name)
    return None if chars is None else ToolCap(max_chars=chars)


@hookimpl(trylast=True)
def tool_file_access(tool_name: str) -> FileAccess | None:
    return FILE_TOOLS.get(tool_name)
