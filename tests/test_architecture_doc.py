"""docs/architecture.md names every module of the package, in its folder's entry of the
layer list, and no module that does not exist, there or anywhere else in the page (issue
37, item 3: its per-folder lists had drifted from the folders in nine places).

In the layer list an entry is a line whose name starts at the fifth column (``cli/``,
``pipeline.py``); its description names the folder's modules by file name, and a
subfolder's modules in parentheses right after the subfolder's name (``pairing/
(step.py, plan.py)``). A package's ``__init__.py`` is named by its folder.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from locations import REPO

DOC = REPO / "docs" / "architecture.md"
PACKAGE = REPO / "middleware"
#: A module or folder named in an entry's description, or a parenthesis.
TOKEN = re.compile(r"(?<![\w./-])(\w+\.py)(?![\w/])|(?<![\w./-])(\w+)/(?![\w/])|(\()|(\))")
#: A module's path anywhere in the page (``formats/wire/anthropic.py``).
PATH = re.compile(r"(?<![\w./-])((?:\w+/)*\w+\.py)\b")
#: A section about one folder: ``## Plugins (`plugin/`)``.
SECTION = re.compile(r"^## .*\(`(\w+)/`\)$")


def layer_block() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("```text\n", text.index("\n## Layers\n")) + len("```text\n")
    return text[start : text.index("\n```", start)].split("\n")


def entries() -> dict[str, str]:
    """Each entry's name and description (its continuation lines joined)."""
    found: dict[str, str] = {}
    name = ""
    for line in layer_block():
        if len(line) > 4 and line[4] != " ":
            name, _, description = line[4:].partition(" ")
            found[name] = description
        elif name:
            found[name] += " " + line.strip()
    return found


def named_in(base: Path, description: str) -> tuple[set[Path], list[str]]:
    """The modules a description names under ``base``, and the names that do not exist."""
    modules: set[Path] = set()
    missing: list[str] = []
    stack = [base]
    previous: re.Match[str] | None = None
    for match in TOKEN.finditer(description):
        module, folder, opening, closing = match.groups()
        if module:
            path = stack[-1] / module
            modules.add(path) if path.is_file() else missing.append(str(path))
        elif folder:
            if not (stack[-1] / folder).is_dir():
                missing.append(f"{stack[-1] / folder}/")
        elif opening:
            named = previous.group(2) if previous is not None else None
            if named and previous and not description[previous.end() : match.start()].strip():
                stack.append(stack[-1] / named)  # the subfolder just named
            else:
                stack.append(stack[-1])
        elif closing and len(stack) > 1:
            stack.pop()
        previous = match
    return modules, missing


def modules_of_the_package() -> set[Path]:
    return {
        path
        for path in PACKAGE.rglob("*.py")
        if "__pycache__" not in path.parts
        and (path.name != "__init__.py" or path.parent == PACKAGE)
    }


def test_the_layer_list_names_every_module_and_no_other() -> None:
    named: set[Path] = set()
    missing: list[str] = []
    for name, description in entries().items():
        if name.endswith("/"):
            modules, absent = named_in(PACKAGE / name.rstrip("/"), description)
            named |= modules
            missing += absent
        elif (PACKAGE / name).is_file():
            named.add(PACKAGE / name)
        else:
            missing.append(name)
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"
    unnamed = sorted(str(p.relative_to(PACKAGE)) for p in modules_of_the_package() - named)
    assert not unnamed, f"name these in their folder's entry of docs/architecture.md: {unnamed}"


def test_the_layers_are_numbered_as_test_layers_orders_them() -> None:
    """An entry without a number is in the layer of the entry above it."""
    from test_layers import LAYER_OF

    number = None
    for line in layer_block():
        if len(line) > 4 and line[4] != " ":
            number = int(line[:4]) if line[:4].strip() else number
            part = line[4:].split()[0].rstrip("/").removesuffix(".py")
            assert LAYER_OF[part] == number, f"{part} is in layer {LAYER_OF[part]}"


def test_every_module_the_page_names_exists() -> None:
    """Outside the layer list, a path is the repository's, the package's, the folder's of
    the section it is in, or a sibling of the path named before it (``formats/wire/
    anthropic.py``, ``openai.py``)."""
    base = previous = PACKAGE
    block = set(layer_block())
    missing = []
    for line in DOC.read_text(encoding="utf-8").split("\n"):
        heading = SECTION.match(line)
        if line.startswith("## "):
            base = previous = PACKAGE / heading.group(1) if heading else PACKAGE
        if line in block:
            continue
        for path in PATH.findall(line):
            found = [root / path for root in (REPO, PACKAGE, base, previous)]
            found = [candidate for candidate in found if candidate.is_file()]
            if not found:
                missing.append(path)
            elif "/" in path:
                previous = found[0].parent
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_a_subfolder_in_parentheses_is_read_as_its_modules(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    for path in ("a.py", "sub/b.py"):
        (tmp_path / path).write_text("", encoding="utf-8")
    modules, missing = named_in(tmp_path, "a.py (what it does), sub/ (b.py, c.py); d/")
    assert modules == {tmp_path / "a.py", tmp_path / "sub" / "b.py"}
    assert missing == [str(tmp_path / "sub" / "c.py"), f"{tmp_path / 'd'}/"]


def one_request() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("```text\n", text.index("\n## One request\n")) + len("```text\n")
    return text[start : text.index("\n```", start)]


#: What a proxied body, or one a wrapped client sends, crosses, in order, and what the
#: diagram calls there (issue 47, item 6): from the two hosts' entries to the ledger, the
#: resume and cold-cache branches included.
PATH_OF_A_REQUEST = [
    ("proxy/app.py", "proxy.app:Proxy.forward"),
    ("integrations/sdk.py", "integrations.sdk:Cleaner.prepare"),
    ("conversations/front.py", "conversations.front:Conversations.request"),
    ("conversations/cleaning.py", "conversations.cleaning:clean_body"),
    ("conversations/engine.py", "conversations.engine:process"),
    ("session/cold_cache.py", "session.cold_cache:SessionCache.request"),
    ("steps/pairing/", "plugin.step_calls:StepCalls.run_step"),
    ("session/resume.py", "session.resume:Continuations.run"),
    ("steps/microcompact/", "session.cold_cache:SessionCache.made"),
    ("proxy/upstream.py", "proxy.app:Proxy._relay"),
    ("ledger/", "conversations.state:ConversationState.answered"),
]


def test_one_request_follows_a_body_from_the_hosts_to_the_ledger() -> None:
    diagram = one_request()
    at = 0
    for room, dotted in PATH_OF_A_REQUEST:
        found = diagram.find(room, at)
        assert found >= 0, f"the One request diagram names {room} after the rooms before it"
        at = found
        module, _, attributes = dotted.partition(":")
        target: object = importlib.import_module(f"middleware.{module}")
        for name in attributes.split("."):
            assert hasattr(target, name), f"{dotted} is gone: the diagram names it"
            target = getattr(target, name)
        assert attributes.split(".")[-1] in diagram, dotted
    for branch in ("does it continue the previous request", "on a cold cache"):
        assert branch in diagram
