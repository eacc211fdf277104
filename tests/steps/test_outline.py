"""The outline of a preview's omitted part: the lines that show the most names the head and
tail do not, with their line numbers, within a budget (issue 17)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

import middleware
from middleware.steps.mentions import distinctive_tokens
from middleware.steps.outline import HEADING, outline

CODE = "".join(
    f"def handler_{i}(event, ctx):\n    return process(event)\n\n" if i % 7 == 0
    else f"    # plain words in line {i}\n"
    for i in range(400)
)  # fmt: skip


def test_the_outline_shows_the_definitions_of_the_middle_with_line_numbers() -> None:
    start, end = 300, len(CODE) - 300
    shown = outline(CODE, start, end, 1_000)
    assert shown.startswith(HEADING)
    lines = shown.splitlines()[2:]
    assert lines, shown
    source = CODE.splitlines()
    for line in lines:
        number, text = line.split(": ", 1)
        assert source[int(number) - 1].strip().startswith(text)
        assert "handler_" in text  # the lines with names, not the plain comments
    assert len(shown) <= 1_000
    numbers = [int(line.split(":")[0]) for line in lines]
    assert numbers == sorted(numbers)


def test_names_the_head_or_tail_shows_are_not_repeated() -> None:
    text = "top handler_a\n" + "x\n" * 50 + "mid handler_a\nmid handler_b\n" + "x\n" * 50
    shown = outline(text, len("top handler_a\n"), len(text), 500)
    assert "handler_b" in shown and "handler_a" not in shown


LOCK = "".join(
    f'  "package_{i:02d}": {{:hex, :package_{i:02d}, "1.{i}.0", "{i:02d}{"ab" * 31}", [:mix], '
    + ", ".join(
        f'{{:dep_{i}_{j}, "~> 0.{j}", [hex: :dep_{i}_{j}, repo: "hexpm"]}}' for j in range(8)
    )
    + "]},\n"
    for i in range(60)
)


def test_long_lines_are_clipped_narrower_when_that_shows_more_of_them() -> None:
    """A lock file's entries: the name and version the model wants come first, a hash and
    dependencies fill the rest of a long line. Narrower lines show more entries."""
    start, end = LOCK.index("\n") + 1, LOCK.rindex("\n", 0, len(LOCK) - 1) + 1
    shown = outline(LOCK, start, end, 2_000)
    versions = [f"1.{i}.0" for i in range(1, 59) if f'"1.{i}.0"' in shown]
    assert len(versions) >= 30, shown
    wide = [line for line in shown.splitlines()[2:] if len(line.split(": ", 1)[1]) > 80]
    assert not wide


def test_only_what_a_clipped_line_shows_counts() -> None:
    """A token past the clip is not shown, so it does not make the line worth showing."""
    hidden_far = "x " * 100 + "far_name_1"
    text = "head\n" + hidden_far + "\n" + "tail\n"
    assert outline(text, 5, len(text) - 5, 1_000) == ""


def test_no_budget_or_nothing_new_gives_no_outline() -> None:
    assert outline(CODE, 100, len(CODE) - 100, 0) == ""
    assert outline("plain words only\n" * 100, 10, 1_500, 1_000) == ""


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from(["alpha_1", "beta.py", "x", "gamma:2", "plain", "\n", " "]), max_size=300
    ).map("".join),
    st.integers(min_value=0, max_value=2_000),
    st.data(),
)
def test_an_outline_fits_its_budget_and_only_quotes_the_omitted_lines(
    text: str, budget: int, data: st.DataObject
) -> None:
    start = data.draw(st.integers(min_value=0, max_value=len(text)))
    end = data.draw(st.integers(min_value=start, max_value=len(text)))
    shown = outline(text, start, end, budget)
    assert len(shown) <= budget
    assert shown == outline(text, start, end, budget)  # a pure function of its inputs
    for line in shown.splitlines()[2:]:
        number, quoted = line.split(": ", 1)
        assert distinctive_tokens(quoted)
        assert text.splitlines()[int(number) - 1].strip().startswith(quoted)


def test_a_spilled_preview_carries_the_outline_and_stays_lossless_and_idempotent() -> None:
    history = [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": "a.py"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "r1", "content": CODE}]},
    ]  # fmt: skip
    policy = middleware.load_policy(env={}, dotenv_path=False)
    with middleware.Pipeline(policy) as pipe:
        first = pipe.process(history)
        preview = first.messages[2]["content"][0]["content"]
        assert "Lines from the omitted part:" in preview
        assert re.search(r"\n\d+: def handler_\d+", preview)
        path = re.search(r"saved to (\S+)\]", preview)
        assert path is not None and pipe.spill.load(path.group(1)) == CODE
        again = pipe.process(first.messages)
        assert again.messages == first.messages


def test_a_line_must_show_a_new_token_per_hundred_characters() -> None:
    """A long line with a single name is not worth its room on every later request; a
    short one with that name is."""
    padding = "words without any names at all " * 4  # 124 characters
    sparse = "head\n" + padding + "lonely_name\n" + "tail\n"
    assert outline(sparse, 5, len(sparse) - 5, 3_000) == ""
    dense = "head\n" + "lonely_name = 1\n" + "tail\n"
    assert "lonely_name" in outline(dense, 5, len(dense) - 5, 3_000)
