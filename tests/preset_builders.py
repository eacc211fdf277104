"""Histories and pipelines for the preset tests: one Anthropic batch of parallel calls."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import middleware
from middleware.plugin.host import PluginHost

Call = tuple[str, str] | tuple[str, str, dict[str, Any]]  # (tool, output[, arguments])
POINTER = re.compile(r"(/[^\s\]]+/tool-results/[^\s\]]+)")


def batch(*calls: Call, before: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """``before`` then one assistant message calling every tool in parallel and one user
    message answering them, ids ``t0``, ``t1``, ..."""
    uses, results = [], []
    offset = sum(1 for m in before if m["role"] == "assistant") * 100
    for i, call in enumerate(calls):
        tool, output = call[0], call[1]
        arguments = call[2] if len(call) > 2 else {}  # type: ignore[misc]
        uses.append({"type": "tool_use", "id": f"t{offset + i}", "name": tool, "input": arguments})
        results.append({"type": "tool_result", "tool_use_id": f"t{offset + i}", "content": output})
    head = list(before) or [{"role": "user", "content": "Go."}]
    return [*head, {"role": "assistant", "content": uses}, {"role": "user", "content": results}]


def outputs(messages: list[dict[str, Any]]) -> list[str]:
    """The tool results of the last message, as text."""
    return [block["content"] for block in messages[-1]["content"]]


@contextmanager
def preset(
    name: str, tmp_path: Path, *plugins: object, **overrides: Any
) -> Iterator[middleware.Pipeline]:
    """A pipeline on the shipped preset ``name`` (spill files under ``tmp_path``), with the
    built-in plugins and ``plugins``; ``overrides`` are dotted policy keys."""
    host = PluginHost.create(load_entrypoints=False)
    for i, plugin in enumerate(plugins):
        host.register(plugin, name=f"plugin-{i}")
    policy = middleware.load_policy(
        f"preset:{name}",
        env={},
        dotenv_path=False,
        overrides={"spill.root": str(tmp_path), **overrides},
    )
    with middleware.Pipeline(policy, host=host, session_id=f"test-{name}") as pipe:
        yield pipe


def spilled_text(preview: str) -> str:
    """The full text saved in the file a preview or notice names."""
    match = POINTER.search(preview)
    assert match is not None, f"no spill path in {preview[-300:]!r}"
    return Path(match.group(1)).read_text(encoding="utf-8")
