"""An integration imported without its library says, in one line, which extra to install
(issue 15, item 5)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CASES = [
    ("middleware.integrations.langchain", "langchain", "langchain"),
    ("middleware.integrations.litellm", "litellm", "litellm"),
]


@pytest.mark.parametrize(("module", "library", "extra"), CASES)
def test_a_missing_library_names_its_extra(module: str, library: str, extra: str) -> None:
    code = (
        f"import sys; sys.modules[{library!r}] = None\n"
        f"try:\n    import {module}\nexcept ImportError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    line = done.stdout.strip()
    assert "\n" not in line and f"[{extra}]" in line and "which is not installed" in line
