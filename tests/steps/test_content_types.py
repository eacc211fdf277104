"""What a result holds is told from what the command printed: a text agent's envelope
(mini-swe-agent's ``<returncode>`` and ``<output>`` tags) is not the content."""

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
        "{}",
    ],
)
def test_a_file_printed_by_a_text_agent_is_source_code(envelope: str) -> None:
    text = envelope.format(SOURCE)
    assert detect_content_type(text) == "Python source"
    assert is_file_text(text)  # so its lines report no error


def test_markup_a_command_printed_is_still_markup() -> None:
    text = "<returncode>0</returncode>\n<output>\n<!DOCTYPE html>\n<html><body></body></html>\n"
    assert detect_content_type(text) == "XML/HTML"
    assert detect_content_type("<returncode>0</returncode>\n<output>\n</output>") == "text"
