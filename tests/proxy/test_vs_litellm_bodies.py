"""benchmarks/vs_litellm.py: a "never seen" copy of a history is valid, differs in every
message, and gets nothing from what the pipeline's cache kept of the original; the quick
mode keeps the options given; a missing LiteLLM is a clear error."""

from __future__ import annotations

import copy
import tempfile
from typing import Any

import pytest

import middleware
from benchmarks.vs_litellm import find_litellm, never_seen, new_opening, options
from middleware.cache import DerivedCache


def history(turns: int = 6) -> list[Any]:
    """A Claude Code-like history: whitespace text before thinking, results as strings and
    as blocks, some over the budget's cap (spilled, previewed with an outline)."""
    messages: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "fix it"}]}]
    for i in range(turns):
        lines = "".join(
            f"src/mod_{i}/file_{n}.py:{n}: error: name_{n} undefined\n"
            for n in range(600 if i % 2 else 40)
        )
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": "\n\n"},
            {"type": "thinking", "thinking": f"look at {i}", "signature": "sig"},
            {"type": "text", "text": f"Step {i}."},
            {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"cmd": f"c{i}"}},
        ]})  # fmt: skip
        content: Any = lines if i % 3 else [{"type": "text", "text": lines}]
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": content},
        ]})  # fmt: skip
    return messages


def test_never_seen_is_valid_and_new_in_every_message() -> None:
    original = history()
    kept = copy.deepcopy(original)
    marked = never_seen(original, "benchT1")
    assert original == kept  # the input is not changed
    assert middleware.check_history(marked, "anthropic") == []
    assert all(a != b for a, b in zip(original, marked, strict=True))
    assert marked != never_seen(original, "benchT2")
    # Whitespace-only text stays whitespace-only (a proxy may drop it).
    assert marked[1]["content"][0] == {"type": "text", "text": "\n\n"}
    assert marked[1]["content"][1] == original[1]["content"][1]  # thinking: signed, kept


def test_only_the_opening_is_new() -> None:
    original = history()
    opened = new_opening(original, "benchT3")
    assert opened[0] != original[0]
    assert opened[1:] == original[1:]


def hits_and_misses(cache: DerivedCache, messages: list[Any], session: str, root: str) -> int:
    """Lookups of ``cache`` that hit while one pipeline processes ``messages``."""
    overrides = {"spill.url": None, "spill.root": root}
    policy = middleware.load_policy(None, env={}, dotenv_path=False, overrides=overrides)
    before = cache.stats().hits
    with middleware.Pipeline(policy, session_id=session, cache=cache) as pipe:
        pipe.process(messages, format="anthropic")
    return cache.stats().hits - before


def test_the_cache_knows_nothing_of_a_never_seen_copy() -> None:
    original = history()
    with tempfile.TemporaryDirectory() as root:
        first = hits_and_misses(DerivedCache(10**9), original, "first", root)
        cache = DerivedCache(10**9)
        hits_and_misses(cache, original, "seen", root)
        marked = hits_and_misses(cache, never_seen(original, "benchT4"), "marked", root)
        opened = hits_and_misses(cache, new_opening(original, "benchT5"), "opened", root)
    # A never-seen copy hits only where the original hit on an empty cache (within the
    # request); a copy sharing its later messages is recognised, which this measure sees.
    assert marked == first
    assert opened > first


def test_quick_keeps_the_options_given() -> None:
    quick = options(["--quick", "--requests", "2"])
    assert (quick.requests, quick.rounds, quick.repeats, quick.idle) == (2, 1, 1, 5.0)
    full = options([])
    assert (full.requests, full.rounds, full.repeats, full.session_requests) == (20, 3, 3, 0)


def test_missing_litellm_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit, match=r"pip install 'litellm\[proxy\]'"):
        find_litellm("/nonexistent/litellm")
    monkeypatch.setenv("PATH", "")
    with pytest.raises(SystemExit, match="virtualenv of its own"):
        find_litellm(None)
