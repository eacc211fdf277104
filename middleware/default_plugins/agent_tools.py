"""The well-known coding agents' file tools, declared as a third-party tool plugin would.

A file read is what an agent acts on next: an edit quotes lines of it. So a read is
bounded by the read tool itself, not by the generic per-result cap (Claude Code never
persists its ``Read``: the tool bounds its own output), and microcompaction keeps it in
the protected window until the file is read again or written. The agents' own bounds:

* Claude Code ``Read``: 2,000 lines, at most 25,000 tokens (about 100,000 characters);
  ``Write`` replaces a whole file (``Edit`` changes part of it: it supersedes nothing);
* opencode ``read``: 2,000 lines or 50 KB (its cap, 80,000, is ChatCLI's ``read``: the
  two share the name); ``write`` replaces a whole file;
* Gemini CLI ``read_file`` (2,000 lines of at most 2,000 characters) and
  ``read_many_files`` (the files its ``include`` globs match); ``write_file``.

A policy's ``tools.<name>`` entry still wins over these caps.
"""

from __future__ import annotations

from middleware.plugin.capabilities import FileAccess, ToolCap
from middleware.plugin.markers import hookimpl

#: What a read tool returns at most, in characters: the tool's own bound.
READ_TOOL_CAPS: dict[str, int] = {
    "Read": 100_000,
    "read_file": 100_000,
    "read_many_files": 100_000,
}

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
}


@hookimpl(trylast=True)
def tool_result_cap(tool_name: str) -> ToolCap | None:
    chars = READ_TOOL_CAPS.get(tool_name)
    return None if chars is None else ToolCap(max_chars=chars)


@hookimpl(trylast=True)
def tool_file_access(tool_name: str) -> FileAccess | None:
    return FILE_TOOLS.get(tool_name)
