"""Whether a result's text is a file's content by its shape: lines numbered as a read
shows them (Claude Code's ``    53→``, ``cat -n`` and ``nl``'s ``    53<tab>``) or source
code (:data:`~middleware.steps.content_types.SOURCE_TYPES`).

A file's lines report nothing: ``errors = load_errors(record)`` or ``{:error, _} ->`` is
code, not a failure. Error lines are picked from logs and command results only (a
summary's ``Error line:``, the error and warning lines a preview's outline shows first),
never from a file's content, whichever tool printed it.
"""

from __future__ import annotations

import re

from middleware.steps.content_types import SOURCE_TYPES, detect_content_type

#: A line as a read numbers it: its number, right-aligned or not, then ``→`` or a tab.
_NUMBERED = re.compile(r"^ *\d+(?:→|\t)", re.MULTILINE)
_TEXT = re.compile(r"^[^\S\n]*\S", re.MULTILINE)
#: Characters looked at from the start: a read's numbering shows from its first lines (a
#: tool's envelope or a reminder it appends is a few lines).
HEAD_CHARS = 16_384
#: Numbered lines a text has at least, and the share of its lines with text they make.
MIN_NUMBERED = 3
NUMBERED_SHARE = 0.5


def is_file_text(text: str, content_type: str | None = None) -> bool:
    """Whether ``text`` is a file's content by its shape (``content_type``: its detected
    type, when the caller has it)."""
    if numbered(text):
        return True
    kind = detect_content_type(text) if content_type is None else content_type
    return kind in SOURCE_TYPES


#: What names a log file: its suffix, or a folder of logs on its path.
LOG_SUFFIXES = (".log", ".out", ".err")
LOG_FOLDERS = frozenset({"log", "logs"})


def is_log_file(path: str) -> bool:
    """Whether the file ``path`` names is a log (``logs/worker.log``, ``/var/log/x``): a
    read of it is a log's lines, whose errors are failures, not code."""
    steps = [step for step in path.replace("\\", "/").lower().split("/") if step]
    if not steps:
        return False
    return steps[-1].endswith(LOG_SUFFIXES) or any(step in LOG_FOLDERS for step in steps[:-1])


def numbered(text: str) -> bool:
    """Whether most lines of the start of ``text`` are numbered as a read numbers them."""
    head = text[:HEAD_CHARS]
    count = len(_NUMBERED.findall(head))
    return count >= MIN_NUMBERED and count >= NUMBERED_SHARE * len(_TEXT.findall(head))
