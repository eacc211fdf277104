"""Lists of tool names in a policy: exact names or glob patterns (``mcp_*``)."""

from __future__ import annotations

import fnmatch
from functools import lru_cache


@lru_cache(maxsize=4096)
def names_match(patterns: tuple[str, ...], name: str) -> bool:
    """Whether ``name`` is one of ``patterns`` or matches one of them as a glob (asked
    for every result of every request: answered once per list and name)."""
    return any(name == pattern or fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
