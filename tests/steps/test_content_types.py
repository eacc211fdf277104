"""What a result holds is told from what the command printed: an agent's envelope
(mini-swe-agent's ``<returncode>`` and ``<output>`` tags, Codex CLI's ``Chunk ID`` /
``Wall time`` / ``Output:`` header) is not the content."""

from __future__ import annotations

import pytest

from middleware.steps.content_types import detect_content_type
from middleware.steps.file_text import is_file_text

SOURCE = (
    '"""The autodoc typehints."""\n\nimport re\nfrom typing import Any\n\n\n'
    "def f(x: Any) -> None:\n    return None\n"
)


@pytest.mark.parametrize(
    "envelope",
    [
        "<returncode>0</returncode>\n<output>\n{}</output>",
        "<returncode>1</returncode>\n<warning>\nThe output of your last command was too long.\n"
        "</warning><output_head>\n{}</output_head>",
        "Chunk ID: a696c4\nWall time: 0.0001 seconds\nProcess exited with code 0\n"
        "Original token count: 38\nOutput:\n{}",
        "Wall time: 14.2438 seconds\nOutput:\n{}",
        "{}",
    ],
)
def test_a_file_printed_by_an_agent_is_source_code(envelope: str) -> None:
    text = envelope.format(SOURCE)
    assert detect_content_type(text) == "Python source"
    assert is_file_text(text)  # so its lines report no error


def test_markup_a_command_printed_is_still_markup() -> None:
    text = "<returncode>0</returncode>\n<output>\n<!DOCTYPE html>\n<html><body></body></html>\n"
    assert detect_content_type(text) == "XML/HTML"
    assert detect_content_type("<returncode>0</returncode>\n<output>\n</output>") == "text"


CODEX = "Chunk ID: dc9c90\nWall time: 0.0000 seconds\nProcess exited with code {code}\nOutput:\n{}"


@pytest.mark.parametrize(
    ("printed", "kind"),
    [
        ('{"name": "chatcli", "version": "1.0"}', "JSON"),
        ("diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n", "diff"),
        ("commit 0123456789abcdef0123456789abcdef01234567\nAuthor: A <a@b.c>\n", "git log"),
    ],
)
def test_what_codex_ran_is_told_from_its_output(printed: str, kind: str) -> None:
    """Codex CLI's header before every command's output: JSON, a diff, a git log are
    what they are, not "text" (10% of the recorded rollouts' outputs were)."""
    assert detect_content_type(CODEX.format(printed, code=0)) == kind
    assert detect_content_type(CODEX.format(printed, code=1)) == kind
    assert detect_content_type("Chunk ID: x\nnot an envelope\n" + printed) == "text"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("import { cp } from 'node:fs';\nimport path from 'node:path';\n", "JavaScript source"),
        ("import path from 'node:path';\nexport const x = 1;\n", "JavaScript source"),
        ("import os, sys\nimport numpy as np\n", "Python source"),
        ("class Cat(Animal):\n    pass\n", "Python source"),
        ("from . import views\n", "Python source"),
    ],
)  # fmt: skip
def test_typescript_imports_are_not_taken_for_python(text: str, kind: str) -> None:
    """A Codex read of a .ts file was summarised as "Python source"."""
    assert detect_content_type(text) == kind
