"""The layout is the architecture: each package imports only from the layers below it, and
no module imports another one that imports it back (``TYPE_CHECKING`` imports included).

docs/architecture.md draws the same layers; a new package is added to :data:`LAYERS` where
it belongs.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from locations import REPO

PACKAGE = REPO / "middleware"

#: Lowest first. A module's part is its first name under ``middleware`` (a package, or a
#: module of the package root); it may import its own part and the parts of lower layers.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"__about__", "errors", "logs", "view", "report"}),
    frozenset({"policy"}),
    frozenset({"cache"}),
    frozenset({"formats", "spill", "session", "records"}),
    frozenset({"plugin", "ledger"}),
    frozenset({"steps", "default_plugins"}),
    frozenset({"conversations"}),  # a conversation's state, the engine over it, the pool
    frozenset({"pipeline"}),  # the library's facade over one policy source and one state
    frozenset({"replay", "proxy", "integrations"}),
    frozenset({"__init__"}),  # the public surface: middleware.Pipeline, middleware.load_policy...
    frozenset({"cli"}),
    frozenset({"__main__"}),
)
LAYER_OF = {part: level for level, parts in enumerate(LAYERS) for part in parts}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def part_of(module: str) -> str:
    names = module.split(".")
    if len(names) == 1:
        return "__init__"
    return names[1]


def imports(module: str) -> Iterator[str]:
    """The package modules ``module`` imports, wherever the import statement is."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for target in targets:
            if target in MODULES and target != module:
                yield target


GRAPH = {module: sorted(set(imports(module))) for module in MODULES}


def test_every_package_has_a_layer() -> None:
    missing = sorted({part_of(m) for m in MODULES} - set(LAYER_OF))
    assert not missing, f"add {missing} to LAYERS (and to docs/architecture.md)"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_layers(module: str) -> None:
    part = part_of(module)
    for target in GRAPH[module]:
        other = part_of(target)
        if other == part:
            continue
        assert LAYER_OF[other] < LAYER_OF[part], (
            f"{module} (layer {LAYER_OF[part]}) imports {target} (layer {LAYER_OF[other]})"
        )


def test_no_import_cycles() -> None:
    """Tarjan's strongly connected components: every one must be a single module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in GRAPH[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in GRAPH:
        if module not in index:
            visit(module)
    assert not cycles, f"import cycles: {cycles}"


def test_the_package_root_holds_only_the_public_surface() -> None:
    root = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(root) <= 12, root
