"""Every preset keeps the product's properties on random histories: the input is never
mutated, processing twice changes nothing, the result is valid, and every character cut is
in the spill file the new text names."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import middleware
from tests.preset_builders import POINTER, preset

TOOLS = ["read", "bash", "grep", "find", "ls", "Read", "Bash", "read_file", "terminal", "@read"]
LINE = st.sampled_from(
    ["x", "src/app.py:12: def main():", "é" * 40, "", "ERROR: failed", "ab " * 300]
)


@st.composite
def outputs(draw: st.DrawFn) -> str:
    line = draw(LINE)
    return "\n".join([line] * draw(st.sampled_from([0, 1, 30, 900, 2600, 6000])))


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Work."}]
    for turn in range(draw(st.integers(1, 6))):
        calls = draw(st.lists(st.tuples(st.sampled_from(TOOLS), outputs()), min_size=1, max_size=4))
        uses, results = [], []
        for i, (tool, output) in enumerate(calls):
            uid = f"toolu_{turn}_{i}"
            arguments = (
                {"path": "a.py", "offset": draw(st.integers(1, 50))} if tool == "read" else {}
            )
            uses.append({"type": "tool_use", "id": uid, "name": tool, "input": arguments})
            results.append({"type": "tool_result", "tool_use_id": uid, "content": output})
        messages += [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]
    return messages


def result_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [
        b["content"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


@pytest.mark.parametrize("name", middleware.preset_names())
@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=histories())
def test_presets_are_pure_idempotent_valid_and_lossless(
    tmp_path: Path, name: str, messages: list[dict[str, Any]]
) -> None:
    before = copy.deepcopy(messages)
    with preset(name, tmp_path, **{"budget.context_aware.window_tokens": 16_000}) as pipe:
        result = pipe.process(messages)
        assert messages == before
        assert middleware.check_history(result.messages, "anthropic") == []
        again = pipe.process(result.messages)
        assert again.messages == result.messages and not again.changed
        for original, sent in zip(
            result_texts(messages), result_texts(result.messages), strict=True
        ):
            if sent == original or sent.startswith(original):  # kept, or a notice appended
                continue
            if not original.strip():  # an empty result's placeholder
                continue
            match = POINTER.search(sent)
            assert match is not None, sent[-200:]
            assert Path(match.group(1)).read_text(encoding="utf-8") == original
