"""What kind of content a tool result holds, for one-line summaries of old results.

The order matters: ChatCLI tests ``package `` before ``diff``, so a diff of Go code is
called "Go source". Here structural formats whose first line is unambiguous (JSON, diff,
git log, tracebacks) are recognised before keyword guesses about source code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from middleware.formats.envelopes import command_output

Rule = tuple[str, Callable[[str, str], bool]]

_DIFF_START = re.compile(r"^(diff --git |diff -|--- \S|Index: |@@ -\d)")
_GIT_LOG = re.compile(r"^commit [0-9a-f]{7,40}\b")
_XML = re.compile(r"^<(\?xml|!DOCTYPE|html|svg|[A-Za-z][\w:-]*[ >])", re.IGNORECASE)
_GREP = re.compile(r"^[^\s:]+:\d+:", re.MULTILINE)
_LISTING = re.compile(r"^(total \d+\n)?[d-][rwx-]{9}", re.MULTILINE)


def _is_json(text: str, head: str) -> bool:
    if not head.startswith(("{", "[")):
        return False
    try:
        json.loads(text)
    except ValueError:
        return head.startswith(('{"', "[{"))
    return True


def _first_lines(head: str, pattern: str) -> bool:
    return re.search(pattern, head, re.MULTILINE) is not None


#: Python's first lines: TypeScript's ``import { x } from 'y'``, ``import x from 'y'`` and
#: ``class X {`` are not Python's, whose imports name modules and whose classes end in ``:``.
_PYTHON = (
    r"^(def |class \w+(\([^)]*\))?:|import [\w.]+( as \w+)?(, [\w.]+( as \w+)?)*$"
    r"|from [\w.]+ import )"
)
#: (type, test on (full stripped text, its first 400 characters)), first match wins.
RULES: tuple[Rule, ...] = (
    ("JSON", _is_json),
    ("diff", lambda text, head: bool(_DIFF_START.match(head))),
    ("git log", lambda text, head: bool(_GIT_LOG.match(head))),
    ("Python traceback", lambda text, head: "Traceback (most recent call last):" in text[:4000]),
    ("XML/HTML", lambda text, head: bool(_XML.match(head))),
    ("grep matches", lambda text, head: len(_GREP.findall(head)) >= 2),
    ("directory listing", lambda text, head: bool(_LISTING.search(head))),
    ("Go source", lambda text, head: _first_lines(head, r"^package \w+$")),
    (
        "Python source",
        lambda text, head: _first_lines(head, _PYTHON),
    ),
    (
        "JavaScript source",
        lambda text, head: _first_lines(
            head, r"^(function |const |let |import .* from |export |module\.exports)"
        ),
    ),
    ("Rust source", lambda text, head: _first_lines(head, r"^(fn |use |pub |impl |mod )")),
    ("shell output", lambda text, head: head.startswith(("$ ", "+ "))),
)


#: Every type :func:`detect_content_type` gives.
CONTENT_TYPES = frozenset({name for name, _ in RULES} | {"text"})
#: The types that are a program's source: a file's content, whose lines report nothing.
SOURCE_TYPES = frozenset(name for name in CONTENT_TYPES if name.endswith(" source"))


def detect_content_type(text: str) -> str:
    """The first matching type of :data:`RULES` for what the command or tool printed (an
    agent's envelope aside, :mod:`~middleware.formats.envelopes`), else ``"text"``."""
    stripped = command_output(text).strip()
    head = stripped[:400]
    for name, test in RULES:
        if test(stripped, head):
            return name
    return "text"
