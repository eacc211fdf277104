"""An integration imported without its library says, in one line, which extra to install
(issue 15, item 5), and each extra installs what its documented example needs."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata

import pytest
from locations import REPO
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

DOCS = (REPO / "docs" / "integrations.md").read_text(encoding="utf-8")
SECTION = re.compile(r"^## (.+?)\n.*?```python\n(.*?)\n```", re.MULTILINE | re.DOTALL)
EXAMPLES = {match.group(1): match.group(2) for match in SECTION.finditer(DOCS)}

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


def _closure(requirements: list[str]) -> set[str]:
    """The distributions ``requirements`` install, with everything they require."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in seen or (requirement.marker and not requirement.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        try:
            todo += [Requirement(r) for r in metadata.requires(name) or []]
        except metadata.PackageNotFoundError:
            continue
    return seen


@pytest.mark.parametrize("section", sorted(EXAMPLES))
def test_each_extra_installs_what_its_documented_example_needs(section: str) -> None:
    """The distributions an example of docs/integrations.md imports, and the one of a
    LangChain model it names (``"anthropic:..."`` needs ``langchain-anthropic``), are
    installed by the extras its section names."""
    code = EXAMPLES[section]
    tail = DOCS.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    extras = re.findall(r"`\[(\w+)\]`", tail.split("```", 2)[-1])
    assert extras, f"the {section} section names no extra"
    wanted = dict(
        tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"][
            "optional-dependencies"
        ]
    )
    installed = _closure([r for extra in extras for r in wanted[extra]])
    modules = set(re.findall(r"^(?:from|import) (\w+)", code, re.MULTILINE)) - {"middleware"}
    modules |= {f"langchain_{p}" for p in re.findall(r'create_agent\(\s*"(\w+):', code)}
    providers = metadata.packages_distributions()
    for module in modules:
        if module in sys.stdlib_module_names:
            continue
        names = {canonicalize_name(d) for d in providers.get(module, [module])}
        assert names & installed, f"{section}: `{module}` is not installed by {extras}"
