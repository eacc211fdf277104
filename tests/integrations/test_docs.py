"""Every example of docs/integrations.md runs, against the provider stand-in, and what
reaches the provider is paired and bounded."""

from __future__ import annotations

import re

import pytest
from locations import REPO
from stand_in import Provider

DOCS = (REPO / "docs" / "integrations.md").read_text(encoding="utf-8")
SECTION = re.compile(r"^## (.+?)\n.*?```python\n(.*?)\n```", re.MULTILINE | re.DOTALL)
EXAMPLES = {match.group(1): match.group(2) for match in SECTION.finditer(DOCS)}


def test_every_section_has_an_example() -> None:
    assert len(EXAMPLES) == 5, list(EXAMPLES)


@pytest.mark.parametrize("section", sorted(EXAMPLES))
# The examples are written as users write them: clients left for the interpreter to close.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_the_example_runs(
    section: str, provider: tuple[Provider, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in, url = provider
    for name, value in {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "OPENAI_BASE_URL": f"{url}/v1",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_API_BASE": f"{url}/v1",
        "GOOGLE_GEMINI_BASE_URL": url,
        "GEMINI_API_KEY": "test-key",
    }.items():
        monkeypatch.setenv(name, value)
    exec(compile(EXAMPLES[section], f"docs/integrations.md: {section}", "exec"), {})
    assert stand_in.accepted, "the example sent nothing to the provider"
    assert not stand_in.refused, stand_in.refused[0][1]
