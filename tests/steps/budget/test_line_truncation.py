"""pi's head and tail truncation: whole lines only, both limits, UTF-8 safe."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from middleware.steps.budget.line_truncation import (
    LineLimits,
    byte_length,
    clip_line,
    format_size,
    truncate_head,
    truncate_tail,
)

texts = st.lists(
    st.text(alphabet=st.characters(blacklist_characters="\n"), max_size=40), max_size=60
).map("\n".join)
limits = st.builds(LineLimits, st.integers(1, 30), st.integers(1, 400))


@given(texts, limits)
def test_head_keeps_whole_leading_lines_within_both_limits(text: str, lim: LineLimits) -> None:
    cut = truncate_head(text, lim)
    if not cut.truncated:
        assert cut.content == text
        return
    kept = cut.content.split("\n") if cut.output_lines else []
    assert kept == text.split("\n")[: cut.output_lines]
    assert cut.output_lines <= lim.max_lines and byte_length(cut.content) <= lim.max_bytes
    assert cut.first_line_exceeds_limit == (cut.output_lines == 0)


@given(texts, limits)
def test_tail_keeps_whole_trailing_lines_or_the_end_of_the_last(text: str, lim: LineLimits) -> None:
    cut = truncate_tail(text, lim)
    if not cut.truncated:
        assert cut.content == text
        return
    assert byte_length(cut.content) <= lim.max_bytes
    if cut.last_line_partial:
        assert text.endswith(cut.content) and "\n" not in cut.content
    else:
        assert cut.content.split("\n") == text.split("\n")[-cut.output_lines :]
        assert cut.output_lines <= lim.max_lines
        assert (
            cut.last_line == cut.total_lines
            and cut.first_line == cut.total_lines - cut.output_lines + 1
        )


def test_which_limit_cut_is_reported() -> None:
    by_lines = truncate_head("\n".join("ab" for _ in range(10)), LineLimits(3, 1000))
    assert (by_lines.truncated_by, by_lines.output_lines, by_lines.total_lines) == ("lines", 3, 10)
    by_bytes = truncate_head("\n".join("abcd" for _ in range(10)), LineLimits(100, 12))
    assert (by_bytes.truncated_by, by_bytes.content) == ("bytes", "abcd\nabcd")


def test_the_tail_of_a_too_long_last_line_never_splits_a_character() -> None:
    cut = truncate_tail("short\n" + "€" * 10, LineLimits(10, 7))  # € is 3 bytes
    assert cut.content == "€€" and cut.last_line_partial and cut.output_bytes == 6


def test_clip_line_and_sizes() -> None:
    assert clip_line("x" * 10, 4, "... [truncated]") == ("xxxx... [truncated]", True)
    assert clip_line("short", 10, "!") == ("short", False)
    assert [format_size(n) for n in (512, 30720, 51200, 50000, 2 * 1048576)] == [
        "512B",
        "30KB",
        "50KB",
        "48.8KB",
        "2MB",
    ]
