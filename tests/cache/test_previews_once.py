"""What a preview reads the whole text for (its lines, its UTF-8 size, the outline of what it
leaves out) is read once per pipeline: a result kept over its cap would otherwise cost it on
every request that carries it. The preview is the same text with the cache on or off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware.cache import DerivedCache
from middleware.steps import previews

BIG = "".join(f"line {i}: value_{i} = compute(x_{i})\n" for i in range(3_000))


def history(turns: int) -> list[Any]:
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for i in range(turns):
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": "cat"}},
        ]})  # fmt: skip
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": BIG + str(i)},
        ]})  # fmt: skip
    return messages


@pytest.mark.parametrize("freeze", [True, False])
def test_a_warm_request_does_not_preview_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, freeze: bool
) -> None:
    measured: list[int] = []
    outlined: list[int] = []
    measure, outline = previews._measure, previews.outline
    monkeypatch.setattr(previews, "_measure", lambda text: measured.append(1) or measure(text))
    monkeypatch.setattr(previews, "outline", lambda *a, **k: outlined.append(1) or outline(*a, **k))
    policy = middleware.load_policy(
        None, env={}, dotenv_path=False,
        overrides={"budget.freeze_decisions": freeze, "microcompact.enabled": False,
                   "spill.root": str(tmp_path)},
    )  # fmt: skip
    with middleware.Pipeline(policy, session_id="s") as pipe:
        first = pipe.process(history(3))
        assert len(first.report.actions) == 3  # three results spilled
        before = (len(measured), len(outlined))
        assert all(before)
        again = pipe.process(history(3))
        assert (len(measured), len(outlined)) == before
        assert again.messages == first.messages
    with middleware.Pipeline(policy, session_id="s", cache=DerivedCache(0)) as uncached:
        assert uncached.process(history(3)).messages == first.messages
