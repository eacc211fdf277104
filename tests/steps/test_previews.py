"""Head + tail previews: exact counts, line-break cuts, never longer than the original."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from middleware import load_policy
from middleware.policy.settings import bind
from middleware.steps.budget.settings import BudgetSettings
from middleware.steps.previews import fit_preview, human_size, make_preview

#: The embedded default policy's preview style (ChatCLI's 4,000 + 1,000).
#: ChatCLI's preview (its test vectors): 4,000 + 1,000 characters, no outline.
STYLE = bind(load_policy("preset:chatcli", env={}, dotenv_path=False), BudgetSettings).preview
PATH = "/tmp/chatcli-agent-abc123/tool-results/call_1-0123456789abcdef.txt"


def parts(preview: str) -> tuple[str, str, str]:
    """Split a default-style preview into head, marker and tail."""
    head, rest = preview.split("\n\n... [", 1)
    marker, tail = rest.split("]\n\n", 1)
    return head, marker, tail


def test_chatcli_vector_a_no_line_breaks() -> None:
    preview = make_preview("x" * 30_000, STYLE, path=PATH)
    assert preview is not None
    head, marker, tail = parts(preview)
    assert (len(head), len(tail)) == (4000, 1000)
    assert marker == f"25000 chars omitted — full output saved to {PATH}"


def test_chatcli_vector_b_lines_keep_the_whole_tail() -> None:
    text = ("a" * 99 + "\n") * 300
    preview = make_preview(text, STYLE, path=PATH)
    assert preview is not None
    head, marker, tail = parts(preview)
    # ChatCLI drops a whole line from a tail that already starts at a line (900 bytes);
    # we keep it, and the count is exact.
    assert (len(head), len(tail)) == (4000, 1000)
    assert marker.startswith("25000 chars omitted")
    assert head.endswith("\n") and tail.startswith("a")


def test_head_cut_back_to_the_last_line_break_and_tail_starts_on_one() -> None:
    text = "".join(f"line {i:05d} " + "y" * 37 + "\n" for i in range(2000))
    preview = make_preview(text, replace(STYLE, head=1000, tail=500), path=PATH)
    assert preview is not None
    head, marker, tail = parts(preview)
    assert head.endswith("\n") and len(head) <= 1000
    assert tail.startswith("line ") and text.endswith(tail) and len(tail) <= 500
    assert marker.startswith(f"{len(text) - len(head) - len(tail)} chars omitted")


def test_small_caps_never_print_a_negative_count_or_grow_the_text() -> None:
    # ChatCLI's example C: cap 1000 on 3000 bytes printed "-2000 chars omitted" and grew.
    assert make_preview("z" * 3000, replace(STYLE, head=4000, tail=1000), path=PATH) is None
    assert make_preview("short", STYLE, path=PATH) is None


def test_head_only_persisted_output_style_in_bytes() -> None:
    style = replace(
        STYLE,
        head=2000,
        tail=0,
        unit="bytes",
        template=(
            "<persisted-output>\nOutput too large ({size}). Full output saved to: {path}\n\n"
            "Preview (first 2KB):\n{head}\n...\n</persisted-output>"
        ),
    )
    text = "é" * 1500 + "\n" + "b" * 60_000
    preview = make_preview(text, style, path=PATH)
    assert preview is not None
    assert preview.startswith("<persisted-output>\nOutput too large (63.0 KB).")
    head = preview.split("Preview (first 2KB):\n", 1)[1].split("\n...\n", 1)[0]
    assert len(head.encode()) <= 2000
    assert head == "é" * 1000  # 2000 bytes exactly, never half a character


def test_one_line_notice_style() -> None:
    style = replace(STYLE, head=500, tail=0, template="{head}\n[truncated — {total} chars total]")
    preview = make_preview("q" * 10_000, style, path=PATH)
    assert preview == "q" * 500 + "\n[truncated — 10000 chars total]"


def test_unknown_template_field_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown field"):
        replace(STYLE, template="{head} {sise}")
    with pytest.raises(ValueError, match="must not be negative"):
        replace(STYLE, head=-1)


def test_human_size() -> None:
    assert [human_size(n) for n in (999, 1000, 85_432, 1_250_000)] == [
        "999 B",
        "1.0 KB",
        "85.4 KB",
        "1.2 MB",
    ]


@settings(max_examples=200)
@given(
    text=st.text(alphabet=st.sampled_from(["a", "b", "\n", "é", "€", "😀"]), max_size=3000),
    head=st.integers(0, 1200),
    tail=st.integers(0, 600),
    unit=st.sampled_from(["chars", "bytes"]),
    line_breaks=st.booleans(),
)
def test_preview_properties(text: str, head: int, tail: int, unit: str, line_breaks: bool) -> None:
    style = replace(STYLE, head=head, tail=tail, unit=unit, line_breaks=line_breaks)  # type: ignore[arg-type]
    preview = make_preview(text, style, path=PATH)
    if preview is None:
        return
    assert len(preview) < len(text)
    h, marker, t = parts(preview)
    assert text.startswith(h) and text.endswith(t)
    measure = (lambda s: len(s.encode())) if unit == "bytes" else len
    assert measure(h) <= head and measure(t) <= tail
    omitted = int(marker.split(" ", 1)[0])
    assert omitted == len(text) - len(h) - len(t) > 0


#: The embedded default's preview: 2,000 + 500 characters and an outline of the middle.
DEFAULT = bind(load_policy(None, env={}, dotenv_path=False), BudgetSettings).preview
SOURCE = "".join(
    f"def handler_{i}(event):\n    return process_{i}(event)\n" if i % 5 == 0 else f"# {i}\n"
    for i in range(2_000)
)


@pytest.mark.parametrize("target", [1_500, 3_000, 4_000])
def test_a_preview_shrunk_to_a_small_cap_keeps_a_share_of_its_outline(target: int) -> None:
    """Head, tail and outline shrink together: given all the room, head and tail would
    crowd the outline out and the preview would fall back to the bare marker."""
    preview = fit_preview(SOURCE, DEFAULT, target, path=PATH, tool="Read")
    assert preview is not None and len(preview) <= target
    assert "Lines from the omitted part:" in preview
    assert preview.startswith("def handler_0") and "handler_1995" in preview


@settings(max_examples=60)
@given(st.integers(min_value=0, max_value=8_000), st.booleans())
def test_a_fitted_preview_never_exceeds_its_target_unless_bare(target: int, grow: bool) -> None:
    preview = fit_preview(SOURCE, DEFAULT, target, path=PATH, tool="Read", grow=grow)
    bare = make_preview(
        SOURCE, replace(DEFAULT, head=0, tail=0, outline_chars=0), path=PATH, tool="Read"
    )
    assert preview is not None and bare is not None
    assert len(preview) <= max(target, len(bare))
