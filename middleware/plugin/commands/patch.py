"""The files a patch in Codex's ``apply_patch`` format changes: ``*** Update File:`` edits
one (a part of it), ``*** Add File:``, ``*** Delete File:`` and ``*** Move to:`` write one
(and a moved file's old path is gone)."""

from __future__ import annotations

import re

from middleware.plugin.file_use import NOTHING, FileUse

_HEADER = re.compile(r"^\*\*\* (Add File|Update File|Delete File|Move to): (.+?)\s*$", re.M)


def patch_use(text: str) -> FileUse:
    """The files ``text`` (a patch) writes and edits, each once."""
    if "*** " not in text:
        return NOTHING
    writes: dict[str, None] = {}
    edits: dict[str, None] = {}
    updated = None
    for found in _HEADER.finditer(text):
        kind, path = found.group(1), found.group(2)
        if kind == "Update File":
            edits[path] = None
            updated = path
        elif kind == "Move to" and updated is not None:
            edits.pop(updated, None)
            writes[updated] = writes[path] = None
        else:
            writes[path] = None
            updated = None
    return FileUse(writes=tuple(writes), edits=tuple(e for e in edits if e not in writes))
