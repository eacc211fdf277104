"""Small rooms (issue 47, item 5): no module of the package is over 350 lines and no class
over 300, so a reader finds one concern per file. Every folder has been split along its
jobs (``formats/`` last), so the whole package is checked: a module that grows past its
lines is split, not exempted.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from locations import REPO

MAX_MODULE_LINES = 350
MAX_CLASS_LINES = 300
#: Every module of the package, its root's and every folder's.
MODULES = sorted((REPO / "middleware").rglob("*.py"))


def name(path: Path) -> str:
    return str(path.relative_to(REPO))


@pytest.mark.parametrize("path", MODULES, ids=name)
def test_no_module_is_over_its_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{name(path)} is {lines} lines: split it along its jobs"


@pytest.mark.parametrize("path", MODULES, ids=name)
def test_no_class_is_over_its_lines(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    big = {
        node.name: (node.end_lineno or node.lineno) - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and (node.end_lineno or node.lineno) - node.lineno + 1 > MAX_CLASS_LINES
    }
    assert not big, f"{name(path)}: classes over {MAX_CLASS_LINES} lines: {big}"
