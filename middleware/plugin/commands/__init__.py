"""What a shell command line does with files, read as the shell would read it, never run:
the files it prints (a read, with the part it printed) and those it writes
(:class:`~middleware.plugin.file_use.FileUse`).

A line is a read only where that is certain (:mod:`.engine`): ``cd src && sed -n
'1,80p' a.py`` reads ``src/a.py`` lines 1-80, ``nl -ba a.py | sed -n '5,9p'`` lines 5-9
of ``a.py``, ``cat a.py | grep x`` a search of ``a.py`` (not all of it); ``go test &&
cat a.py``, a loop, a variable's file, a line that cannot be split read nothing. POSIX
shells (:mod:`.syntax`, :mod:`.posix`) and PowerShell (:mod:`.powershell`,
:mod:`.cmdlets`) are read; an argument vector
(``["bash", "-lc", "..."]``) is the line its shell runs.
"""

from __future__ import annotations

import shlex
from functools import lru_cache
from typing import Literal

from middleware.plugin.commands import cmdlets, posix, powershell
from middleware.plugin.commands.engine import follow
from middleware.plugin.commands.syntax import Unreadable, parse
from middleware.plugin.file_use import NOTHING, FileUse

Dialect = Literal["sh", "powershell"]
DIALECTS: tuple[Dialect, ...] = ("sh", "powershell")
#: Shells whose ``-c`` (``-lc``...) argument is a POSIX command line, and PowerShell's names.
_POSIX_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash"})
_POWERSHELLS = frozenset({"powershell", "pwsh", "powershell.exe", "pwsh.exe"})
#: Command lines remembered (the same call is read on every request of a session).
CACHED = 4096


def shell_use(command: object, dialect: Dialect = "sh", workdir: str | None = None) -> FileUse:
    """The files ``command`` (a command line, or an argument vector) reads and writes,
    run from ``workdir`` (``None``: relative paths stay as written)."""
    if isinstance(command, list | tuple) and command and all(isinstance(w, str) for w in command):
        line = argv_line(tuple(command))
        if line is None:
            return NOTHING
        command, dialect = line
    if not isinstance(command, str) or (workdir is not None and not isinstance(workdir, str)):
        return NOTHING
    return _line_use(command, dialect, workdir)


def argv_line(argv: tuple[str, ...]) -> tuple[str, Dialect] | None:
    """The command line an argument vector runs and its dialect: a shell's ``-c`` script,
    or the vector itself as a POSIX line."""
    program = argv[0].replace("\\", "/").rsplit("/", 1)[-1].lower()
    if program in _POSIX_SHELLS and len(argv) >= 3 and argv[-2].startswith("-") and "c" in argv[-2]:
        return argv[-1], "sh"
    if program in _POWERSHELLS and len(argv) >= 3 and argv[-2].lower() in ("-command", "-c"):
        return argv[-1], "powershell"
    if program in _POSIX_SHELLS | _POWERSHELLS:
        return None
    return shlex.join(argv), "sh"


@lru_cache(maxsize=CACHED)
def _line_use(command: str, dialect: Dialect, workdir: str | None) -> FileUse:
    try:
        if dialect == "powershell":
            return follow(powershell.split(command), workdir, cmdlets.effect)
        return follow(parse(command), workdir, posix.effect)
    except Unreadable:
        return NOTHING
