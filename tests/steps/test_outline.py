"""The outline of a preview's omitted part: its error and warning lines first (issue 25),
then the lines that show the most names the head and tail do not, with their line
numbers, within a budget (issue 17)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

import middleware
from middleware.steps.line_kinds import ERROR, WARNING, frames, severities
from middleware.steps.mentions import distinctive_tokens
from middleware.steps.outline import HEADING, outline
from middleware.steps.previews import PreviewStyle, make_preview
from middleware.steps.read_back import FileRead

CODE = "".join(
    f"def handler_{i}(event, ctx):\n    return process(event)\n\n"
    if i % 7 == 0
    else f"    # plain words in line {i}\n"
    for i in range(400)
)


def squeezed(line: str) -> str:
    """A line with its runs of spaces squeezed: the outline shows error lines as they
    are, other lines squeezed (test_outline.py checks which)."""
    return " ".join(line.split())


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


@settings(max_examples=100)
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
        # Runs of whitespace are shown as one space.
        assert squeezed(text.splitlines()[int(number) - 1]).startswith(squeezed(quoted))


def test_a_spilled_preview_carries_the_outline_and_stays_lossless_and_idempotent() -> None:
    history = [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "r1", "name": "Bash", "input": {"command": "./gen.sh"}}]},
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


REPORTS = {
    "src/a.c:3:5: error: 'x' undeclared (first use in this function)": ERROR,
    "src/app/router.ts(41,7): error TS2345: Argument of type 'string'": ERROR,
    "error[E0308]: mismatched types": ERROR,
    "error: could not compile `crate_19` (lib) due to 1 previous error": ERROR,
    "tests/test_a.py::test_parse FAILED                      [ 9%]": ERROR,
    "FAILED tests/test_a.py::test_parse - AssertionError: assert 1 == 2": ERROR,
    "E       AssertionError: assert 1776 == 1777": ERROR,
    "tests/test_a.py:186: AssertionError": ERROR,
    "Traceback (most recent call last):": ERROR,
    "KeyError: 'database_url'": ERROR,
    "Caused by: java.lang.IllegalStateException: card expired": ERROR,
    "npm ERR! code E404": ERROR,
    "npm error code 3": ERROR,
    "fatal: not a git repository (or any of the parent directories): .git": ERROR,
    "panic: runtime error: index out of range [3] with length 3": ERROR,
    "thread 'main' panicked at src/main.rs:4:5:": ERROR,
    "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-compiler-plugin": ERROR,
    "2026-03-02 09:14:07,112 ERROR orders.import: batch 131 skipped": ERROR,
    "CONFLICT (content): Merge conflict in docs/page_041.md": ERROR,
    "make: *** [Makefile:10: build/codec_37.o] Error 1": ERROR,
    "F401 [*] `os` imported but unused": ERROR,
    "=========== 10 failed, 390 passed in 0.69s ===========": ERROR,
    "src/a.c:6:9: warning: unused variable 'scratch' [-Wunused-variable]": WARNING,
    "warning: unused variable: `unused_10`": WARNING,
    "npm warn deprecated inflight@1.0.6: This module is not supported": WARNING,
    "  /tmp/project/tests/test_a.py:331: DeprecationWarning: run_all() is deprecated": WARNING,
    "[WARNING] Service00.java:[5,25] Integer(int) has been deprecated": WARNING,
}
NOT_REPORTS = (
    "    except ValueError:",
    "        raise KeyError(name)",
    "    def record_error(self, error: Exception) -> None:",
    "        if error:",
    "    error = None",
    "tests/test_errors.py::test_error_is_raised PASSED                  [ 40%]",
    "    Raises:",
    "        ValueError: if the name is empty.",
    "LEVELS = ['ERROR', 'WARNING']",
    "logger.setLevel(logging.ERROR)",
    "=========== 400 passed in 0.69s ===========",
    "Compiling crate_07 v0.1.7 (/tmp/project/crates/crate_07)",
)


def test_error_and_warning_lines_are_told_from_code_that_names_errors() -> None:
    text = "\n".join([*REPORTS, *NOT_REPORTS]) + "\n"
    found = severities(text, 0, len(text))
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    levels = {
        line: found.get(start, 0) for line, start in zip(text.splitlines(), starts, strict=False)
    }
    assert {line: levels[line] for line in REPORTS} == REPORTS
    assert {line: levels[line] for line in NOT_REPORTS} == dict.fromkeys(NOT_REPORTS, 0)


def test_stack_frames_are_found() -> None:
    lines = [
        '  File "/tmp/project/worker.py", line 13, in depth',
        "    at com.example.billing.Billing.charge(Billing.java:11)",
        "    at domainOf (/tmp/project/sync.js:3:49)",
        "   --> crates/crate_19/src/lib.rs:2:22",
        "pipeline/stage_03.py:9: in run",
        "    return a + b",
    ]
    text = "\n".join(lines) + "\n"
    starts = sorted(frames(text, 0, len(text)))
    assert [text[s : text.index("\n", s)] for s in starts] == lines[:5]


TRACE = (
    "".join(f"2026-03-02 09:14:{n % 60:02d} INFO worker: item {n} imported\n" for n in range(80))
    + "Traceback (most recent call last):\n"
    + '  File "/tmp/project/run.py", line 40, in <module>\n'
    + "    main()\n"
    + '  File "/tmp/project/importer.py", line 12, in parse_order\n'
    + "    return order['customer']['email']\n"
    + "KeyError: 'email'\n"
    + "".join(f"2026-03-02 09:15:{n % 60:02d} INFO worker: item {n} imported\n" for n in range(80))
)


def test_an_error_comes_with_the_frame_that_locates_it() -> None:
    start, end = 2_000, len(TRACE) - 500
    shown = outline(TRACE, start, end, 3_000)
    assert "\n86: KeyError: 'email'" in shown
    assert "\n81: Traceback (most recent call last):" in shown
    assert '\n84: File "/tmp/project/importer.py", line 12, in parse_order' in shown


def test_a_line_that_breaks_a_run_is_shown_before_the_token_cover() -> None:
    lines = [f"tests/test_api.py::test_endpoint_{n:03d} PASSED" for n in range(300)]
    lines[150] = "tests/test_api.py::test_endpoint_150 SKIPPED (needs network_access)"
    text = "\n".join(lines) + "\n"
    shown = outline(text, 2_000, len(text) - 500, 600)
    assert "\n151: tests/test_api.py::test_endpoint_150 SKIPPED (needs network_access)" in shown


LOG_LINE = st.sampled_from(
    [
        "alpha_1 ok",
        "x",
        "FAILED tests/t.py::test_a",
        "error: boom in beta.py",
        '  File "a.py", line 3, in f',
        "ValueError: bad gamma:2",
        "WARNING: slow delta_4",
        "plain  words",
        "",
    ]
)


@settings(max_examples=150)
@given(st.lists(LOG_LINE, max_size=300), st.integers(min_value=0, max_value=3_000), st.data())
def test_an_outline_of_a_log_fits_and_quotes_its_lines_in_order(
    lines: list[str], budget: int, data: st.DataObject
) -> None:
    text = "\n".join(lines) + "\n"
    start = data.draw(st.integers(min_value=0, max_value=len(text)))
    end = data.draw(st.integers(min_value=start, max_value=len(text)))
    shown = outline(text, start, end, budget)
    assert len(shown) <= budget
    assert shown == outline(text, start, end, budget)  # a pure function of its inputs
    if not shown:
        return
    assert shown.startswith(HEADING)
    body = shown.splitlines()[2:]
    quoted = [line for line in body if not line.startswith("… and ")]
    notices = body[len(quoted) :]
    assert all(line.startswith("… and ") for line in notices)  # the notices come last
    numbers = [int(line.split(": ", 1)[0]) for line in quoted]
    assert numbers == sorted(set(numbers))  # file order, each line once
    first = text.count("\n", 0, start) + 1 + (start > 0 and text[start - 1] != "\n")
    for number, line in zip(numbers, quoted, strict=True):
        assert first <= number and text[:end].count("\n") >= number  # wholly omitted
        assert squeezed(lines[number - 1]).startswith(squeezed(line.split(": ", 1)[1]))


def test_pytests_raising_line_is_an_error_and_keeps_its_spacing() -> None:
    """pytest marks the code that raised with ``>`` and the code's own indentation: the
    model copies that line into its fix, so the outline takes it first, as it is."""
    raised = ">               original.expand_dims(OrderedDict((('d', 4),)), e=4)"
    report = [f"filler line number {n} of the run" for n in range(60)]
    text = (
        "\n".join([*report[:30], "    def test_expand_dims_error(self):", raised, *report[30:]])
        + "\n"
    )
    start = text.index("filler line number 5 ")
    assert ERROR in severities(text, start, len(text) - 100).values()
    shown = outline(text, start, len(text) - 100, 3_000)
    assert raised in shown  # not "> original.expand_dims(..."


def test_pytests_failure_lines_keep_their_spacing() -> None:
    """pytest's ``E`` lines are the failure's own words: the model copies them, and the
    spaces inside a value the assertion compares are part of the value ('a  b' is not
    'a b')."""
    failure = [
        "E       AssertionError: assert 'total:  3 items' == 'total: 3 items'",
        "E         - total: 3 items",
        "E         + total:  3 items",
    ]
    report = [f"filler line number {n} of the run" for n in range(60)]
    text = "\n".join([*report[:30], *failure, *report[30:]]) + "\n"
    start = text.index("filler line number 5 ")
    shown = outline(text, start, len(text) - 100, 3_000)
    for line in failure:
        assert line in shown


def numbered_file(lines: int) -> str:
    """``cat -n`` of a Go file whose middle returns errors on many lines: code that names
    failures, not failures."""
    code = []
    for i in range(lines):
        if i % 5 == 0:
            code.append(f"func openCache_{i}(path string) (*Cache, error) {{")
        else:
            code.append('\treturn nil, fmt.Errorf("failed to open the cache file")')
    return "".join(f"{n:>6}\t{line}\n" for n, line in enumerate(code, 1))


def shell_preview(command: str, text: str) -> tuple[str, str]:
    """The default's preview of ``text`` as Bash's output of ``command``, and the lines of
    its outline."""
    history = [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "r1", "name": "Bash", "input": {"command": command}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "r1", "content": text}]},
    ]  # fmt: skip
    policy = middleware.load_policy(env={}, dotenv_path=False)
    with middleware.Pipeline(policy) as pipe:
        preview = pipe.process(history).messages[2]["content"][0]["content"]
    return preview, preview.partition(HEADING)[2].split("\n\n")[0]


def test_a_file_read_through_a_shell_is_outlined_by_its_names_not_its_errors() -> None:
    """``cat -n`` is a command, but its output is a file's content: the outline shows
    the definitions of the middle, not the lines that name errors first."""
    text = numbered_file(1_000)  # over the 30,000 a read through a shell keeps
    preview, shown = shell_preview("cat -n cache.go", text)
    assert re.search(r"\n\d+: \d+ func openCache_\d+", shown), preview
    assert "failed to open" not in shown
    assert "more error line" not in shown


def test_a_declared_file_read_is_outlined_without_its_error_lines() -> None:
    """A result of a tool that reads a file has no error lines, whatever its shape."""
    text = "".join(
        f"[ERROR] entry {i} of the fixture\n" if i % 2 else f"fixture_value_{i} = {i}\n"
        for i in range(400)
    )
    style = PreviewStyle(
        head=500,
        tail=200,
        unit="chars",
        template="{head}{outline}\n\n{tail}",
        line_breaks=True,
        outline_chars=1_500,
    )
    as_output = make_preview(text, style, path="/s/r1.txt")
    as_read = make_preview(
        text, style, path="/s/r1.txt", file=FileRead("Read", "/repo/fixture.txt", "")
    )
    assert as_output is not None and as_read is not None
    output_lines = as_output.partition(HEADING)[2].split("\n\n")[0]
    read_lines = as_read.partition(HEADING)[2].split("\n\n")[0]
    assert "[ERROR] entry" in output_lines
    assert "[ERROR] entry" not in read_lines
    assert "fixture_value_" in read_lines


def test_a_log_file_read_through_a_shell_is_outlined_by_its_errors() -> None:
    """``cat logs/worker.log`` reads a file, but a log's lines are a log's: the outline of
    a cut one shows its error lines first, as a command's log would."""
    lines = [
        f"2026-11-20T10:{i // 60:02d}:{i % 60:02d}Z INFO worker processed job_{i}\n"
        for i in range(2_000)
    ]
    for i in range(500, 1_500, 25):  # 40 failures in the middle
        lines[i] = f"2026-11-20T10:00:00Z ERROR worker job {i} failed: KeyError: 'session'\n"
    text = "".join(lines)
    preview, shown = shell_preview("cat logs/worker.log", text)
    errors = [line for line in shown.splitlines() if " ERROR worker job " in line]
    assert len(errors) >= 20 or "more error line" in shown, preview


def test_error_lines_are_shown_whole_when_they_all_fit() -> None:
    """An assertion's values come after its first 160 characters: while every error line
    fits whole, each is shown whole (up to 400); when they do not, more of them are shown
    clipped, and the rest counted."""
    value = "'\\n<!DOCTYPE html>\\n<html>\\n  <head>\\n" + '<meta x="y" />\\n' * 12 + "</html>'"
    failure = f"E       assert '<dd class=\"field-odd\"><p>JSONObject</p>' in {value}"
    assert 160 < len(failure) < 400
    report = [f"filler line number {n} of the run" for n in range(60)]
    text = "\n".join([*report[:30], failure, *report[30:]]) + "\n"
    start = text.index("filler line number 5 ")
    assert failure in outline(text, start, len(text) - 100, 3_000)
    many = "\n".join([*report[:30], *[f"{failure} {n}" for n in range(40)], *report[30:]]) + "\n"
    shown = outline(many, start, len(many) - 100, 3_000)
    assert failure not in shown and failure[:150] in shown
    assert re.search(r"… and \d+ more error lines", shown)


def test_the_line_a_report_announces_is_shown_with_it() -> None:
    """``... the following exception was raised:`` says the next line is the report's
    own words (here an exception's message with no severity word in it)."""
    warning = (
        "WARNING: autodoc: failed to import module 'my_types'; the following exception was raised:"
    )
    report = [f"filler line number {n} of the run" for n in range(60)]
    text = "\n".join([*report[:30], warning, "No module named 'my_types'", *report[30:]]) + "\n"
    start = text.index("filler line number 5 ")
    shown = outline(text, start, len(text) - 100, 3_000)
    assert f"\n31: {warning}\n32: No module named 'my_types'" in shown
