"""The public line (issue 47, item 6): what ``import middleware`` offers, and the modules of
the integrations that need an extra, are the public API; every other module is internal.
Their names are pinned here, as httpx pins its ``__all__``: adding or removing a public
name is a decision this file records. And the README, the docs and the examples import
only public names from public modules."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import SimpleNamespace

from locations import REPO

import middleware

#: Exactly what ``from middleware import *`` gives.
PUBLIC = {
    "Action",
    "ActionKind",
    "Admission",
    "Cap",
    "Conversation",
    "ConversationIndex",
    "Decision",
    "DecisionLedger",
    "DeclaredCap",
    "FileAccess",
    "FileUse",
    "FormatError",
    "HistoryError",
    "InputError",
    "LoopAlert",
    "LoopGuardError",
    "MiddlewareError",
    "MissingExtraError",
    "Node",
    "Opaque",
    "Pipeline",
    "PluginError",
    "PluginHost",
    "Policy",
    "PolicyError",
    "ProblemReport",
    "ProcessResult",
    "Report",
    "SealedBlock",
    "SpillError",
    "SpillStore",
    "Step",
    "StepContext",
    "ToolCall",
    "ToolCap",
    "ToolOutput",
    "ToolResult",
    "Violation",
    "__version__",
    "check_history",
    "cleaner_of",
    "detect_format",
    "hookimpl",
    "load_policy",
    "preset_names",
    "validate_policy_file",
    "wrap",
}
#: The modules of the integrations (each needs its extra, so ``middleware`` cannot import
#: them), and their ``__all__``.
INTEGRATIONS = {
    "middleware.integrations.langchain": {"ChatcliMiddleware", "recall_tool_for"},
    "middleware.integrations.litellm": {
        "ChatcliCallback",
        "completion",
        "proxy_handler_instance",
    },
}
#: Where users are shown imports: the README, the docs, the examples.
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
EXAMPLES = sorted((REPO / "examples").rglob("*.py"))
#: A Python import of the package, in a page (``from m import (a, b)`` may span lines).
IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(middleware(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]+)"
    r"|import[ \t]+(middleware(?:\.\w+)*))",
    re.MULTILINE,
)


def declared_all(module: str) -> list[str]:
    """A module's ``__all__``, read from its source (its extra need not be installed)."""
    path = REPO / Path(*module.split(".")).with_suffix(".py")
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"{module} declares no __all__")


def test_the_package_exports_exactly_the_public_names() -> None:
    assert set(middleware.__all__) == PUBLIC
    assert middleware.__all__ == sorted(middleware.__all__), "keep __all__ sorted"
    assert len(middleware.__all__) == len(PUBLIC), "a name is listed twice"
    for name in middleware.__all__:
        assert getattr(middleware, name) is not None, name


def test_the_integrations_declare_exactly_their_public_names() -> None:
    for module, names in INTEGRATIONS.items():
        assert set(declared_all(module)) == names, module


def test_what_the_docs_send_users_to_is_exported() -> None:
    from middleware.plugin.host import PluginHost
    from middleware.report import ActionKind, Step
    from middleware.spill import SpillError

    assert middleware.PluginHost is PluginHost
    assert middleware.SpillError is SpillError
    assert middleware.ActionKind is ActionKind and middleware.Step is Step
    assert issubclass(middleware.SpillError, middleware.MiddlewareError)
    assert issubclass(middleware.SpillError, OSError)
    cleaner = object()  # what wrap() hangs on the client it returns
    assert middleware.cleaner_of(SimpleNamespace(_chatcli_cleaner=cleaner)) is cleaner


def imports_in(text: str) -> list[tuple[str, set[str]]]:
    """Each import of the package in ``text``: the module, and the names taken from it
    (none for ``import middleware...``)."""
    found = []
    for match in IMPORT.finditer(text):
        module, names, plain = match.groups()
        if plain:
            found.append((plain, set()))
            continue
        listed = names.strip().strip("()").replace("\n", " ")
        found.append((module, {n.split(" as ")[0].strip() for n in listed.split(",") if n.strip()}))
    return found


def test_the_pages_import_only_public_names() -> None:
    public = {"middleware": PUBLIC, **INTEGRATIONS}
    wrong = []
    seen = 0
    for path in [*PAGES, *EXAMPLES]:
        for module, names in imports_in(path.read_text(encoding="utf-8")):
            seen += 1
            where = path.relative_to(REPO)
            if module not in public:
                wrong.append(f"{where}: {module} is internal")
            elif not_public := names - public[module]:
                wrong.append(f"{where}: {module} does not export {sorted(not_public)}")
    assert seen >= 20  # the pages' examples were found
    assert not wrong, f"import public names only (or export them): {wrong}"


def test_imports_are_read_from_a_page_as_python_reads_them() -> None:
    text = """
```python
import middleware
from middleware import Cap, hookimpl  # a comment
from middleware.plugin.host import (
    PluginHost,
    Other as Named,
)
    import middleware.view
```
"""
    assert imports_in(text) == [
        ("middleware", set()),
        ("middleware", {"Cap", "hookimpl"}),
        ("middleware.plugin.host", {"PluginHost", "Other"}),
        ("middleware.view", set()),
    ]
