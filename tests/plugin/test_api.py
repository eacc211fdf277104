"""The plugin API is what docs/plugins.md says it is (issue 37, item 2): ``StepContext`` has
the members the docs list and no other (the built-in steps' extras are behind
``context.internal``), the types the hooks take and return are exported by ``middleware``
and named so in the docs, and every ``middleware.`` name the docs use exists."""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import fields

from locations import REPO

import middleware
from middleware.plugin import hookspecs

DOCS = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")
SPECS = [value for value in vars(hookspecs).values() if hasattr(value, "chatcli_middleware_spec")]
#: Annotations that are no type of ours.
BUILTIN_TYPES = {"None", "Any"}


def section(heading: str) -> str:
    start = DOCS.index(f"\n{heading}\n")
    end = DOCS.index("\n## ", start + 1)
    return DOCS[start:end]


def test_step_context_has_the_members_the_docs_list() -> None:
    text = section("## What a step implementation works on")
    documented = set(re.findall(r"`context\.(\w+)", text))
    public = {f.name for f in fields(middleware.StepContext)} | {
        name for name in vars(middleware.StepContext) if not name.startswith("_")
    }
    assert public == documented
    assert "`context.internal` holds" in text and "not part of the plugin API" in text


def hook_types() -> set[str]:
    """The names of the types the hook specifications take and return."""
    found: set[str] = set()
    for spec in SPECS:
        signature = inspect.signature(spec)
        annotations = [p.annotation for p in signature.parameters.values()]
        for annotation in [*annotations, signature.return_annotation]:
            found.update(re.findall(r"\b[A-Z]\w*", str(annotation)))
    return found - BUILTIN_TYPES


def test_the_types_of_the_hooks_are_exported_and_documented_so() -> None:
    types = hook_types()
    assert {"Conversation", "StepContext", "ConversationIndex", "ToolCap"} <= types
    for name in sorted(types):
        assert name in middleware.__all__, f"export middleware.{name}"
        assert f"middleware.{name}" in DOCS, f"docs/plugins.md names {name} otherwise"


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for part in parts[end:]:
            if not hasattr(found, part):
                return False
            found = getattr(found, part)
        return True
    return False


def test_every_middleware_name_in_the_docs_exists() -> None:
    loggers = "".join(path.read_text(encoding="utf-8") for path in REPO.glob("middleware/**/*.py"))
    for dotted in sorted(set(re.findall(r"`(middleware(?:\.\w+)+)", DOCS))):
        if f'getLogger("{dotted}")' in loggers:
            continue  # a logger's name
        assert resolves(dotted), f"docs/plugins.md names {dotted}, which does not exist"
        name = dotted.split(".")[1]
        if dotted.count(".") == 1 and not name.islower():
            assert name in middleware.__all__, f"{dotted} is not exported"
