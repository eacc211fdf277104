"""The preview says how to read the rest back, and following its words gets exactly the
lines it names: with a shell, from the proxy's recall URL, or with `chatcli-mw recall`."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import middleware
from middleware.policy.settings import bind
from middleware.spill.recall import lines_of
from middleware.steps.previews import default_read_back, make_preview
from middleware.steps.read_back import ReadBack
from tests.session_builders import spilled

COMMAND = re.compile(r"`([^`]+)`")


def numbered(n: int, width: int = 60) -> str:
    return "".join(f"line {i:05d} " + "x" * width + "\n" for i in range(1, n + 1))


def lines(text: str, first: int, last: int) -> str:
    return "".join(text.splitlines(keepends=True)[first - 1 : last])


def test_following_the_path_form_with_a_shell_gets_the_hidden_lines(tmp_path: Path) -> None:
    text = numbered(400)
    folder = tmp_path / "with space"
    preview = spilled({"spill.keep": True}, text, "s1", folder)
    said = re.search(
        r"\[Lines (\d+)-(\d+) of 400 are not shown: read them with `([^`]+)`"
        r"(?: for lines [^]]*,)? before acting on them\]",
        preview,
    )
    assert said is not None, preview
    first, last = int(said.group(1)), int(said.group(2))
    head, tail = preview.split("\n\n... [")[0], preview.rsplit("\n\n", 1)[1]
    assert text.startswith(head) and text.endswith(tail)
    assert first == head.count("\n") + 1 and last == 400 - tail.count("\n")
    if shutil.which("sed") is None:
        pytest.skip("no sed on this machine")
    read = subprocess.run(
        ["bash", "-c", said.group(3)], capture_output=True, text=True, check=True
    ).stdout
    suggested = re.search(r"sed -n '(\d+),(\d+)p'", said.group(3))
    assert suggested is not None and int(suggested.group(1)) == first
    count = int(suggested.group(2)) - first + 1
    assert read == lines(text, first, first + count - 1)
    assert len(read) <= 4000 < len(read) + len(lines(text, first + count, first + count))


def test_the_url_form_names_the_proxys_recall_route_and_the_command_form_the_cli(
    tmp_path: Path,
) -> None:
    text = numbered(300)
    session = "team/alice 1"
    via_url = spilled(
        {"recall.form": "url", "recall.url": "http://10.0.0.5:8787/"}, text, session, tmp_path
    )
    url = COMMAND.search(via_url.split("\n[Lines ")[1])
    assert url is not None
    assert url.group(1).startswith("curl -s 'http://10.0.0.5:8787/recall/team%2Falice%201/toolu_1-")
    via_command = spilled({"recall.form": "command", "spill.keep": True}, text, session, tmp_path)
    command = COMMAND.search(via_command.split("\n[Lines ")[1])
    assert command is not None
    argv = command.group(1).split(" ", 2)
    assert argv[:2] == ["chatcli-mw", "recall"]
    # Run what the preview says, with this interpreter's chatcli-mw and the same store.
    tail = subprocess.run(
        [sys.executable, "-m", "middleware", "recall", *_shell_words(argv[2])],
        capture_output=True,
        text=True,
        check=True,
        env={"CHATCLI_SPILL__ROOT": str(tmp_path), "PATH": "/usr/bin:/bin"},
    ).stdout
    first = int(re.search(r"--offset (\d+)", command.group(1)).group(1))  # type: ignore[union-attr]
    limit = int(re.search(r"--limit (\d+)", command.group(1)).group(1))  # type: ignore[union-attr]
    assert tail == lines(text, first, first + limit - 1)


def _shell_words(text: str) -> list[str]:
    import shlex

    return shlex.split(text)


SPILL = "/tmp/chatcli-agent-s/tool-results/toolu_1-0123456789abcdef.txt"
KEY = "s/toolu_1-0123456789abcdef.txt"
FORMS = {
    "path": f"read them with `sed -n '27,87p' {SPILL}`",
    "url": f"read them with `curl -s 'http://proxy:8787/recall/{KEY}?offset=27&limit=61'`",
    "command": f"read them with `chatcli-mw recall {KEY} --offset 27 --limit 61`",
    "tool": f"read them with the recall tool (path {SPILL}, offset 27, limit 61)",
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_range_that_covers_part_of_the_hidden_lines_says_so(form: str) -> None:
    """Lines 27-695 are hidden and 61 lines fit the read size: the sentence says the
    command shows lines 27-87 and how to read the rest, in every form."""
    text = "".join(f"line {n:04d} of the log\n" for n in range(1, 702))  # 61 lines: 1,281 chars
    location = SPILL
    read_back = ReadBack(**{**default_read_back().__dict__, "form": form, "read_chars": 1_290,
                            "url": "http://proxy:8787"})  # fmt: skip
    head_end = text.index("line 0027")
    tail_start = text.index("line 0696")
    said = read_back.instruction(text, location, head_end, tail_start, session="s", total_lines=701)
    assert said == (
        f"Lines 27-695 of 701 are not shown: {FORMS[form]} for lines 27-87, then lines "
        "88-695 the same way, 61 lines at a time, before acting on them"
    )
    # A range that covers every hidden line says nothing more.
    covered = read_back.instruction(
        text, location, head_end, text.index("line 0088"), session="s", total_lines=701
    )
    assert covered == (
        f"Lines 27-87 of 701 are not shown: {FORMS[form].replace('695', '87')} before acting "
        "on them"
    )


def test_a_template_of_its_own_keeps_its_fields() -> None:
    """A user's template written before ``{rest}`` says what it said."""
    text = "".join(f"line {n:04d} of the log\n" for n in range(1, 702))
    template = (
        "Read {path} from line {first}, {count} lines at a time, up to {hidden_last} of {lines}"
    )
    read_back = ReadBack(
        **{**default_read_back().__dict__, "read_chars": 1_290, "path_template": template}
    )
    said = read_back.instruction(
        text,
        "/s/r.txt",
        text.index("line 0027"),
        text.index("line 0696"),
        session="s",
        total_lines=701,
    )
    assert said == "Read /s/r.txt from line 27, 61 lines at a time, up to 695 of 701"


def test_auto_picks_the_form_from_where_the_output_is() -> None:
    read_back = default_read_back()
    local = "/tmp/chatcli-agent-s/tool-results/toolu_1-0123456789abcdef.txt"
    remote = "s3://bucket/p/chatcli-agent-s/tool-results/toolu_1-0123456789abcdef.txt"
    other = "plugin-store:42"
    text = numbered(50)

    def said(rb: ReadBack, location: str) -> str:
        return rb.instruction(text, location, 100, len(text) - 100, session="s", total_lines=50)

    assert "sed -n" in said(read_back, local)
    assert "chatcli-mw recall s/toolu_1-0123456789abcdef.txt" in said(read_back, remote)
    with_url = ReadBack(**{**read_back.__dict__, "url": "https://proxy.internal"})
    assert "curl -s 'https://proxy.internal/recall/s/toolu_1-" in said(with_url, remote)
    # A plugin's store names its own locations: only its path can be said.
    assert "sed -n" in said(with_url, other) and "plugin-store:42" in said(with_url, other)


def test_the_form_is_a_policy_setting_and_a_preset_says_it_its_way() -> None:
    claude = bind(middleware.load_policy("preset:claude-code", env={}, dotenv_path=False), ReadBack)
    assert "Read tool" in claude.path_template
    with pytest.raises(middleware.PolicyError, match=r"recall.path_template.*\{nope\}"):
        middleware.load_policy(
            env={}, dotenv_path=False, overrides={"recall.path_template": "read {nope}"}
        )
    with pytest.raises(middleware.PolicyError, match=r"recall\.form"):
        middleware.load_policy(env={}, dotenv_path=False, overrides={"recall.form": "ftp"})


@settings(max_examples=200)
@given(
    body=st.lists(st.text(alphabet="ab \t", max_size=120), min_size=1, max_size=200),
    ends_with_newline=st.booleans(),
    head=st.integers(0, 3000),
    tail=st.integers(0, 3000),
    read_chars=st.integers(1, 2000),
)
def test_the_named_lines_are_the_hidden_ones_and_fit_the_read_size(
    body: list[str], ends_with_newline: bool, head: int, tail: int, read_chars: int
) -> None:
    text = "\n".join(body) + ("\n" if ends_with_newline else "")
    style = bind(
        middleware.load_policy(
            env={},
            dotenv_path=False,
            overrides={
                "budget.preview.head": head,
                "budget.preview.tail": tail,
                "budget.preview.outline_chars": 0,
                "recall.read_chars": read_chars,
            },
        ),
        middleware.steps.budget.settings.BudgetSettings,
    ).preview
    location = "/tmp/chatcli-agent-s/tool-results/toolu_1-0123456789abcdef.txt"
    preview = make_preview(text, style, path=location, session="s")
    if preview is None:
        return
    said = re.search(
        r"\[Lines (\d+)-(\d+) of (\d+) are not shown: read them with `sed -n "
        r"'(\d+),(\d+)p' \S+`(.*) before acting on them\]",
        preview,
    )
    assert said is not None, preview
    hidden_first, hidden_last, total, first, last = map(int, said.groups()[:5])
    count = last - first + 1
    # The sentence says how much the range covers, and how to read the rest.
    rest = said.group(6)
    if last < hidden_last:
        assert rest == (
            f" for lines {first}-{last}, then lines {last + 1}-{hidden_last} "
            f"the same way, {count} lines at a time,"
        )
    else:
        assert rest == ""
    every = lines_of(text, location, 1, None)
    assert total == every.total
    shown_head = preview.split("\n\n... [", 1)[0]
    shown_tail = preview.rsplit("]\n\n", 1)[1] if tail else ""
    # The first hidden line is the one the head does not show whole; the last likewise.
    assert hidden_first == shown_head.count("\n") + 1
    whole_tail_lines = shown_tail.count("\n") + (
        0 if shown_tail.endswith("\n") or not shown_tail else 1
    )
    if shown_tail and not text[: len(text) - len(shown_tail)].endswith("\n"):
        whole_tail_lines -= 1
    assert hidden_last == max(total - whole_tail_lines, hidden_first)
    assert first == hidden_first and last <= hidden_last
    read = lines_of(text, location, first, count).text
    assert count == 1 or len(read) <= read_chars
