"""The imports and definitions of a source file, for the summary of a read of it.

A summarised read tells the agent to read the file again before acting on it (an edit
must match the file as it is); what the summary keeps of the file is the first lines of
its skeleton: the modules it imports and the classes and functions it defines, each line
as the read printed it (with the read's own number, when the read numbers its lines). An
agent writing code against the module copies its imports; one going back to a function
finds it by its name, and with a number, reads back only its lines.

Which file is source code is said by its name (:data:`SOURCE_SUFFIXES`): a Markdown
file's ``use the flag`` is prose, a ``.py`` file's ``import os`` is an import. Lines are
kept in file order, the first that fit, and the heading says how many of how many.
"""

from __future__ import annotations

import re

#: The suffixes of the files whose reads keep their definitions: programming languages
#: whose imports and definitions open with a keyword (:data:`DEFINITION`).
SOURCE_SUFFIXES = frozenset(
    {
        ".py", ".pyi", ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts",
        ".go", ".rs", ".java", ".kt", ".kts", ".scala", ".cs", ".swift", ".c", ".h",
        ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".rb", ".ex", ".exs", ".php", ".lua", ".dart",
    }
)  # fmt: skip
#: A line that imports or defines something, after its indentation and the number a read
#: may put before it (``    53→``, ``cat -n``'s ``    53<tab>``): a keyword, then a space
#: or a ``<`` (``impl<T>``), so ``type(x)`` and ``object.method()`` are not. A line of an
#: import's list (TypeScript's ``type Name,``) is kept too: an edit of the imports quotes it.
DEFINITION = re.compile(
    r"^[ \t]*(?:\d+(?:→|\t))?[ \t]*"
    r"(?:from[^\S\n]+[\w.]+[^\S\n]+import|import|export|(?:async[^\S\n]+)?def|class"
    r"|(?:async[^\S\n]+)?function|interface|enum|struct|trait|impl|fn|pub(?:\([\w:]+\))?"
    r"|use|mod|func|type|package|namespace|using|public|private|protected|internal|fun"
    r"|object|defmodule|defp|defmacro|defmacrop|alias|require|require_relative|module"
    r"|#include|template)(?=[^\S\n]|<)[^\n]*",
    re.MULTILINE,
)
#: Characters of one line kept at most: a signature's name and first parameters.
LINE_WIDTH = 160
#: The first line of the definitions, when all are shown, and when the first are.
HEADING = "\nImports and definitions:"
FIRST_OF = "\nImports and definitions (the first {shown} of {total}):"


def is_source_file(path: str) -> bool:
    """Whether ``path`` names a program's source file, by its suffix."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1].lower()
    dot = name.rfind(".")
    return dot > 0 and name[dot:] in SOURCE_SUFFIXES


def definition_lines(text: str) -> list[str]:
    """Every line of ``text`` that imports or defines something, stripped, each clipped
    to :data:`LINE_WIDTH` characters (a clipped line ends with ``…``)."""
    found = []
    for match in DEFINITION.finditer(text):
        # Up to the first break splitlines() knows besides "\n" (a CRLF file's "\r").
        line = match.group().splitlines()[0].strip()
        found.append(line if len(line) <= LINE_WIDTH else line[: LINE_WIDTH - 1] + "…")
    return found


def definitions(text: str, budget: int) -> str:
    """The heading and the first definition lines of ``text`` that fit, in at most
    ``budget`` characters in all, or ``""`` (none, or not even one fits)."""
    lines = definition_lines(text)
    if not lines or budget <= 0:
        return ""
    whole = HEADING + "".join(f"\n{line}" for line in lines)
    if len(whole) <= budget:
        return whole
    shown: list[str] = []
    used = len(FIRST_OF.format(shown=len(lines), total=len(lines)))  # the widest heading
    for line in lines:
        if used + len(line) + 1 > budget:
            break
        shown.append(line)
        used += len(line) + 1
    if not shown:
        return ""
    heading = FIRST_OF.format(shown=len(shown), total=len(lines))
    return heading + "".join(f"\n{line}" for line in shown)
