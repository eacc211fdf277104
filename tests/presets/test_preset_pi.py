"""pi's truncation rules through ``policies/presets/pi.yaml``, one test per scenario of
the seed document (with its 30 KB byte limit; pi now uses 50 KB, the preset's default)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.preset_builders import batch, outputs, preset, spilled_text

SEED_BYTES = {"budget.line_limits.max_bytes": 30 * 1024}


def run(tmp_path: Path, tool: str, output: str, arguments: Any = None, **overrides: Any) -> str:
    with preset("pi", tmp_path, **{**SEED_BYTES, **overrides}) as pipe:
        result = pipe.process(batch((tool, output, arguments or {})))
        (text,) = outputs(result.messages)
        assert spilled_text(text) == output  # nothing lost: the notice names the full text
        again = pipe.process(result.messages)
        assert again.messages == result.messages and not again.changed
        return text


def numbered(first: int, last: int, width: int = 0) -> str:
    return "\n".join(f"{i:0{width}d}" if width else str(i) for i in range(first, last + 1))


def notices(text: str) -> list[str]:
    return text.rsplit("\n\n", 1)[1].split("\n")


# -- read: head truncation with offset continuation ----------------------------------


def test_read_first_line_over_the_limit_returns_only_the_notice(tmp_path: Path) -> None:
    text = run(tmp_path, "read", "x" * 50 * 1024 + "\nshort", {"path": "src/big.min.js"})
    first, pointer = text.split("\n")
    assert first == (
        "[Line 1 is 50KB, exceeds 30KB limit. Use bash: "
        "sed -n '1p' -- src/big.min.js | head -c 30720]"
    )
    assert pointer.startswith("[Full output: ")


def test_read_hit_the_line_limit(tmp_path: Path) -> None:
    text = run(tmp_path, "read", numbered(1, 5000), {"path": "a.txt"})
    body, _ = text.split("\n\n")
    assert body == numbered(1, 2000)
    assert notices(text)[0] == "[Showing lines 1-2000 of 5000. Use offset=2001 to continue]"


def test_read_hit_the_byte_limit(tmp_path: Path) -> None:
    lines = [f"{i:05d} " + "y" * 54 for i in range(1, 5001)]  # 61 bytes with its newline
    text = run(tmp_path, "read", "\n".join(lines), {"path": "a.txt"})
    shown = (30 * 1024 + 1) // 61
    assert text.split("\n\n")[0] == "\n".join(lines[:shown])
    assert notices(text)[0] == (
        f"[Showing lines 1-{shown} of 5000 (30KB limit). Use offset={shown + 1} to continue]"
    )


def test_read_with_offset_hit_the_line_limit(tmp_path: Path) -> None:
    text = run(tmp_path, "read", numbered(1000, 5000), {"path": "a.txt", "offset": 1000})
    assert text.split("\n\n")[0] == numbered(1000, 2999)
    assert notices(text)[0] == "[Showing lines 1000-2999 of 5000. Use offset=3000 to continue]"


def test_read_with_offset_hit_the_byte_limit(tmp_path: Path) -> None:
    lines = [f"{i:05d} " + "y" * 54 for i in range(1000, 5001)]
    text = run(tmp_path, "read", "\n".join(lines), {"path": "a.txt", "offset": 1000})
    shown = (30 * 1024 + 1) // 61
    last = 1000 + shown - 1
    assert notices(text)[0] == (
        f"[Showing lines 1000-{last} of 5000 (30KB limit). Use offset={last + 1} to continue]"
    )


def test_read_with_offset_first_line_over_the_limit(tmp_path: Path) -> None:
    output = "z" * 50 * 1024 + "\n" + numbered(1001, 1200)
    text = run(tmp_path, "read", output, {"path": "file", "offset": 1000})
    assert text.split("\n")[0] == (
        "[Line 1000 is 50KB, exceeds 30KB limit. Use bash: sed -n '1000p' -- file | head -c 30720]"
    )


def test_read_offset_given_as_a_json_string_argument(tmp_path: Path) -> None:
    # OpenAI-style arguments arrive as a JSON string; the offset is still honoured.
    text = run(tmp_path, "read", numbered(10, 2500), '{"path": "a.txt", "offset": "10"}')
    assert notices(text)[0] == "[Showing lines 10-2009 of 2500. Use offset=2010 to continue]"


# -- bash: tail truncation, full output in a file -------------------------------------


def test_bash_hit_the_line_limit(tmp_path: Path) -> None:
    text = run(tmp_path, "bash", numbered(1, 50000))
    body, notice = text.split("\n\n")
    assert body == numbered(48001, 50000)
    assert notice.startswith("[Showing lines 48001-50000 of 50000. Full output: /")


def test_bash_hit_the_byte_limit(tmp_path: Path) -> None:
    lines = [f"{i:05d} " + "b" * 54 for i in range(1, 50001)]
    text = run(tmp_path, "bash", "\n".join(lines))
    shown = (30 * 1024 + 1) // 61
    first = 50000 - shown + 1
    assert text.split("\n\n")[0] == "\n".join(lines[-shown:])
    assert notices(text)[0].startswith(
        f"[Showing lines {first}-50000 of 50000 (30KB limit). Full output: /"
    )


def test_bash_last_line_alone_over_the_limit_keeps_its_end(tmp_path: Path) -> None:
    output = numbered(1, 49999) + "\n" + "é" * 50 * 1024  # 100 KB of two-byte characters
    text = run(tmp_path, "bash", output)
    body, notice = text.split("\n\n")
    assert body == "é" * (30 * 1024 // 2)  # never half a character
    assert notice.startswith("[Showing last 30KB of line 50000 (line is 100KB). Full output: /")


# -- grep: 100 matches, 500-character lines, byte limit -------------------------------


def test_grep_hit_the_match_limit(tmp_path: Path) -> None:
    output = "\n".join(f"file.ts:{i}: match {i}" for i in range(1, 251))
    text = run(tmp_path, "grep", output)
    assert text.split("\n\n")[0] == "\n".join(f"file.ts:{i}: match {i}" for i in range(1, 101))
    assert (
        notices(text)[0] == "[100 matches limit reached. Use limit=200 for more, or refine pattern]"
    )


def test_grep_hit_the_byte_limit_before_the_match_limit(tmp_path: Path) -> None:
    output = "\n".join(f"file.ts:{i}: " + "m" * 400 for i in range(1, 100))
    text = run(tmp_path, "grep", output)
    shown = len(text.split("\n\n")[0].split("\n"))
    assert shown < 99
    assert notices(text)[0] == f"[30KB limit reached ({shown} of 99 matches shown)]"


def test_grep_long_match_lines_are_clipped_to_500_characters(tmp_path: Path) -> None:
    output = "file.ts:10: " + "v" * 700 + "\nfile.ts:25: normal match"
    text = run(tmp_path, "grep", output)
    first, second = text.split("\n\n")[0].split("\n")
    assert first == ("file.ts:10: " + "v" * 700)[:500] + "... [truncated]"
    assert second == "file.ts:25: normal match"
    assert notices(text)[0] == (
        "[Some lines truncated to 500 chars. Use read tool to see full lines]"
    )


# -- find and ls: result and entry limits ---------------------------------------------


def test_find_hit_the_result_limit(tmp_path: Path) -> None:
    text = run(tmp_path, "find", "\n".join(f"src/file{i}.ts" for i in range(1, 1501)))
    assert len(text.split("\n\n")[0].split("\n")) == 1000
    assert notices(text)[0] == (
        "[1000 results limit reached. Use limit=2000 for more, or refine pattern]"
    )


def test_find_hit_the_byte_limit(tmp_path: Path) -> None:
    text = run(tmp_path, "find", "\n".join(f"src/{'d' * 80}/file{i}.ts" for i in range(900)))
    assert notices(text)[0] == "[30KB limit reached]"


def test_ls_hit_the_entry_limit(tmp_path: Path) -> None:
    entries = [".gitignore", "README.md", "src/", *(f"f{i}.txt" for i in range(700))]
    text = run(tmp_path, "ls", "\n".join(entries))
    assert text.split("\n\n")[0].split("\n")[:3] == [".gitignore", "README.md", "src/"]
    assert notices(text)[0] == "[500 entries limit reached. Use limit=1000 for more]"


def test_ls_hit_the_byte_limit(tmp_path: Path) -> None:
    text = run(tmp_path, "ls", "\n".join(f"{'e' * 100}{i}" for i in range(400)))
    assert notices(text)[0] == "[30KB limit reached]"


# -- limits as parameters, and what stays untouched -----------------------------------


@pytest.mark.parametrize(("max_bytes", "label"), [(30 * 1024, "30KB"), (50 * 1024, "50KB")])
def test_the_byte_limit_is_a_parameter(tmp_path: Path, max_bytes: int, label: str) -> None:
    lines = [f"{i:05d} " + "y" * 54 for i in range(1, 2001)]  # 122 KB, 2,000 lines
    text = run(
        tmp_path, "read", "\n".join(lines), None, **{"budget.line_limits.max_bytes": max_bytes}
    )
    assert f"({label} limit)" in notices(text)[0]


def test_the_preset_default_is_pis_current_50kb(tmp_path: Path) -> None:
    with preset("pi", tmp_path) as pipe:
        assert pipe.policy.get("budget.line_limits.max_bytes") == 51200
        assert pipe.policy.get("budget.line_limits.max_lines") == 2000


def test_output_within_both_limits_is_untouched(tmp_path: Path) -> None:
    with preset("pi", tmp_path) as pipe:
        messages = batch(("read", numbered(1, 2000), {"path": "a"}), ("bash", numbered(1, 100)))
        result = pipe.process(messages)
        assert result.messages == messages and not result.changed


def test_an_unanswered_call_gets_pis_synthetic_result(tmp_path: Path) -> None:
    with preset("pi", tmp_path) as pipe:
        messages = batch(("bash", "ok"))
        messages[-1]["content"] = []
        messages[-1]["content"].append({"type": "text", "text": "never mind"})
        result = pipe.process(messages)
        block = result.messages[-1]["content"][0]
        assert block["content"] == "No result provided" and block["is_error"] is True
