"""A preview never hides an error (issue 25): over real tool outputs, every error line the
default preview leaves out is quoted by its outline while they fit the outline's budget,
and a notice counts and places those that do not.

The corpus (``tests/corpus/tool-outputs/``) is what real tools printed, made by
``tests/corpus/make_tool_outputs.py``; its error lines are labelled by that generator from
what it broke, never by the outline's classifier.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import middleware
from middleware.policy.settings import bind
from middleware.steps.budget.settings import BudgetSettings
from middleware.steps.outline import HEADING, LINE_WIDTHS
from middleware.steps.previews import PreviewStyle, make_preview, parse_preview

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "tool-outputs"
CASES = sorted(p.name.removesuffix(".labels.json") for p in CORPUS.glob("*.labels.json"))
PATH = "/tmp/chatcli-agent-s/tool-results/r1-0123456789abcdef.txt"
NOTICE = re.compile(r"^… and (\d+) more (?:error|warning) lines? \(lines? (\d+)(?:–(\d+))?\)$")


def squeezed(line: str) -> str:
    """A line with its runs of spaces squeezed: the outline shows error lines as they
    are, other lines squeezed (test_outline.py checks which)."""
    return " ".join(line.split())


def default_style() -> PreviewStyle:
    policy = middleware.load_policy(None, env={}, dotenv_path=False)
    return bind(policy, BudgetSettings).preview


STYLE = default_style()


def omitted_and_outline(text: str, lines: list[int]) -> tuple[list[int], str]:
    """Which of ``lines`` the default preview of ``text`` leaves out, and its outline."""
    preview = make_preview(text, STYLE, path=PATH)
    assert preview is not None
    fields = parse_preview(preview, STYLE)
    assert fields is not None
    head, tail = len(fields["head"]), len(fields["tail"])
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    omitted = [n for n in lines if starts[n] > head and starts[n - 1] < len(text) - tail]
    return omitted, fields["outline"]


def quoted(outline: str) -> dict[int, str]:
    found = {}
    for line in outline.splitlines():
        number, sep, rest = line.partition(": ")
        if sep and number.isdigit():
            found[int(number)] = rest
    return found


def at_most_cost(text: str, numbers: list[int]) -> int:
    """What quoting ``numbers`` costs the outline at most (its lines clipped at the widest
    width, whitespace runs shown as one space)."""
    lines = text.splitlines()
    widest = LINE_WIDTHS[0]
    return len(HEADING) + sum(
        len(f"\n{n}: ") + min(len(lines[n - 1].strip()), widest) for n in numbers
    )


def assert_errors_shown_or_counted(text: str, errors: list[int]) -> None:
    omitted, outline = omitted_and_outline(text, errors)
    shown = quoted(outline)
    lines = text.splitlines()
    for number, rest in shown.items():  # what is quoted is that line
        assert squeezed(lines[number - 1]).startswith(squeezed(rest)), (number, rest)
    hidden = [n for n in omitted if n not in shown]
    if at_most_cost(text, omitted) <= STYLE.outline_chars:
        assert not hidden, f"error lines {hidden} fit the outline but are not in it:\n{outline}"
        return
    notices = [m for line in outline.splitlines() if (m := NOTICE.match(line))]
    if hidden:
        assert notices, f"error lines {hidden} are left out and no notice says so:\n{outline}"
        counted = sum(int(m.group(1)) for m in notices)
        assert counted >= len(hidden)
        ranges = [(int(m.group(2)), int(m.group(3) or m.group(2))) for m in notices]
        for number in hidden:
            assert any(low <= number <= high for low, high in ranges), (number, ranges)


@pytest.mark.parametrize("name", CASES)
def test_every_omitted_error_line_of_a_real_output_is_shown_or_counted(name: str) -> None:
    text = (CORPUS / f"{name}.txt").read_text()
    labels = json.loads((CORPUS / f"{name}.labels.json").read_text())
    assert labels["errors"], "a corpus output has error lines"
    assert_errors_shown_or_counted(text, labels["errors"])


def test_the_corpus_is_real_small_and_varied() -> None:
    sizes = [(CORPUS / f"{name}.txt").stat().st_size for name in CASES]
    assert 12 <= len(CASES) <= 20
    assert sum(p.stat().st_size for p in CORPUS.iterdir()) < 600_000
    assert all(size > 5_000 for size in sizes)  # each is cut by the default preview
    text = "".join((CORPUS / f"{name}.txt").read_text() for name in CASES)
    assert "/work/" not in text and "/root/" not in text  # no private path of the machine


def test_the_corpus_shows_most_of_its_omitted_error_lines() -> None:
    """The corpus figure of issue 25: it was 50 of 147 before errors came first."""
    omitted = shown = 0
    for name in CASES:
        text = (CORPUS / f"{name}.txt").read_text()
        labels = json.loads((CORPUS / f"{name}.labels.json").read_text())
        left, outline = omitted_and_outline(text, labels["errors"])
        omitted += len(left)
        shown += len(set(left) & set(quoted(outline)))
    assert omitted > 100
    assert shown / omitted >= 0.95


def test_a_test_run_with_a_failure_every_37th_line_shows_every_omitted_failure() -> None:
    """Issue 25's pytest log: 399 lines, a failure every 37th. The outline used to show
    60 ``PASSED`` lines and none of the nine failures the head and tail leave out."""
    lines = [
        f"tests/test_api.py::test_endpoint_{n:03d} "
        + ("FAILED" if n % 37 == 0 else "PASSED").ljust(8)
        + f"[{n * 100 // 399:3d}%]"
        for n in range(1, 400)
    ]
    text = "\n".join(lines) + "\n"
    failures = [n for n in range(1, 400) if n % 37 == 0]
    omitted, outline = omitted_and_outline(text, failures)
    assert len(omitted) == 9
    shown = quoted(outline)
    assert all(n in shown and "FAILED" in shown[n] for n in omitted), outline
    assert_errors_shown_or_counted(text, failures)


def test_a_build_log_shows_its_one_error_and_the_file() -> None:
    """Issue 25's build log: 599 lines, one ``[error]`` line in the middle."""
    lines = [
        f"[info] {n * 0.013:7.3f}s compiled src/app/module_{n:03d}.ts ({n * 37 % 900} B)"
        for n in range(1, 600)
    ]
    lines[299] = (
        "[error] src/app/router.ts(41,7): TS2345 Argument of type 'string' is not "
        "assignable to parameter of type 'number'."
    )
    text = "\n".join(lines) + "\n"
    omitted, outline = omitted_and_outline(text, [300])
    assert omitted == [300]
    assert "\n300: [error] src/app/router.ts(41,7): TS2345 Argument of type" in outline


def test_errors_that_do_not_fit_are_counted_with_their_lines() -> None:
    lines = [f"step {n}: ok" for n in range(1, 2001)]
    for n in range(100, 1900, 10):
        lines[n - 1] = f"src/module_{n}.c:{n}:5: error: '{n}_value' undeclared here"
    text = "\n".join(lines) + "\n"
    errors = list(range(100, 1900, 10))
    omitted, outline = omitted_and_outline(text, errors)
    notice = outline.splitlines()[-1]
    match = NOTICE.match(notice)
    assert match is not None, outline
    shown = [n for n in omitted if n in quoted(outline)]
    assert shown == omitted[: len(shown)]  # the first ones, in file order
    assert int(match.group(1)) == len(omitted) - len(shown)
    assert (int(match.group(2)), int(match.group(3))) == (omitted[len(shown)], omitted[-1])
    assert len(outline) <= STYLE.outline_chars
    assert_errors_shown_or_counted(text, errors)
