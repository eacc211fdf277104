"""The policy snapshot: a validated, deep-frozen document and where each value came from."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class Override:
    """An explicit override's value and who set it (``"command line --port"``): what the
    policy's origins, the console's "set by" and an error's "(set by ...)" then say, where
    a bare value reads "override"."""

    value: Any
    origin: str


@dataclass(frozen=True)
class Policy:
    """A validated, deep-frozen policy document and where it came from.

    A policy from :func:`~middleware.load_policy` carries every key (the schema's defaults
    are its lowest layer); read it through settings objects (:mod:`middleware.policy.settings`)
    rather than key by key.
    """

    data: Mapping[str, Any]
    source: str
    #: dotted key -> where its value came from ("default", "file:line", "env CHATCLI_X",
    #: ".env (path) CHATCLI_X", "override", or what an :class:`Override` names).
    origins: Mapping[str, str] = field(default_factory=dict)
    #: The files a user edits that the policy was read from: its own and those it
    #: ``extends``, base first (shipped presets and the default policy are not among them).
    #: Hot reload watches these and nothing else.
    files: tuple[str, ...] = ()
    #: Settings objects already bound from this snapshot (see ``settings.bind``).
    _bound: dict[type, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def name(self) -> str:
        return str(self.data.get("name", self.source))

    @property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON of the document (equal policies, equal digests)."""
        canonical = json.dumps(thaw(self.data), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def get(self, dotted: str, default: Any = None) -> Any:
        """The value at ``section.key`` (``default`` when absent)."""
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node

    def tool_entry(self, tool_name: str) -> tuple[str, Mapping[str, Any]] | None:
        """The ``tools`` entry for ``tool_name`` and its key: the entry named exactly,
        else the longest glob pattern that matches (``mcp_*``), or ``None``."""
        tools = self.get("tools") or {}
        exact = tools.get(tool_name)
        if exact is not None:
            return tool_name, exact
        patterns = [k for k in tools if any(c in k for c in "*?[") and fnmatchcase(tool_name, k)]
        if not patterns:
            return None
        key = max(sorted(patterns), key=len)
        return key, tools[key]

    def to_dict(self) -> dict[str, Any]:
        """The document as plain JSON-compatible data."""
        thawed: dict[str, Any] = thaw(self.data)
        return thawed


def freeze(value: Any) -> Any:
    """``value`` with every mapping read-only and every list a tuple."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The inverse of :func:`freeze`: plain dicts and lists."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value
