"""Small rooms (issue 47, item 5): in a folder whose modules have been split along their
jobs, no module is over 350 lines and no class over 300, so a reader finds one concern per
file. A folder joins :data:`KEPT_SMALL` once its rooms are split; the whole package once
every one is.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from locations import REPO

MAX_MODULE_LINES = 350
MAX_CLASS_LINES = 300
#: The folders whose rooms are kept small, their subfolders included.
KEPT_SMALL = (
    "middleware/cli",
    "middleware/conversations",
    "middleware/integrations",
    "middleware/ledger",
    "middleware/plugin",
    "middleware/policy",
    "middleware/proxy",
    "middleware/records",
    "middleware/replay",
    "middleware/session",
    "middleware/spill",
    "middleware/steps",
    "middleware/view",
)
MODULES = sorted(path for folder in KEPT_SMALL for path in (REPO / folder).rglob("*.py"))


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
