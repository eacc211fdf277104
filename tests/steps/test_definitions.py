"""A source file's imports and definitions, as the summary of a read of it keeps them
(middleware/steps/definitions.py): the lines that import or define something in each
language the suffixes name, as the read printed them, the first that fit, and a heading
that says how many of how many."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from middleware.steps.definitions import (
    FIRST_OF,
    HEADING,
    LINE_WIDTH,
    definition_lines,
    definitions,
    is_source_file,
)

PYTHON = '''"""Generating content for autodoc using typehints."""

import re
from collections import OrderedDict

from sphinx.application import Sphinx


def record_typehints(app: Sphinx, name: str) -> None:
    """Record type hints to env object."""
    # import nothing here: a comment is no import
    importance = 3
    typed = type(name)
    return None


class Merger:
    async def merge(self, node: Element) -> None:
        pass
'''


def test_a_python_file_keeps_its_imports_classes_and_functions_in_order() -> None:
    assert definition_lines(PYTHON) == [
        "import re",
        "from collections import OrderedDict",
        "from sphinx.application import Sphinx",
        "def record_typehints(app: Sphinx, name: str) -> None:",
        "class Merger:",
        "async def merge(self, node: Element) -> None:",
    ]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('package main\n\nimport "fmt"\n\nfunc (s *Server) Run() error {\n\tx := 1\n}\n'
         "type Server struct {\n",
         ["package main", 'import "fmt"', "func (s *Server) Run() error {",
          "type Server struct {"]),
        ("use std::io;\n\npub(crate) fn read() -> io::Result<()> {\n    let x = 1;\n}\n"
         "impl<T> Reader for T {\n",
         ["use std::io;", "pub(crate) fn read() -> io::Result<()> {", "impl<T> Reader for T {"]),
        ("import { x } from './x';\nexport default function App() {\n  const y = 2;\n}\n"
         "interface Props {\n",
         ["import { x } from './x';", "export default function App() {", "interface Props {"]),
        ("import {\n  type EvalTargetRef,\n  resolve,\n} from './targets';\n",
         ["import {", "type EvalTargetRef,"]),  # an edit of the imports quotes their lines
        ("defmodule Ash.Errors do\n  alias Ash.Error\n  def load_errors(record) do\n"
         "    {:error, _} ->\n  defp render(x), do: x\n",
         ["defmodule Ash.Errors do", "alias Ash.Error", "def load_errors(record) do",
          "defp render(x), do: x"]),
        ("#include <stdio.h>\nint main(void) {\n  return 0;\n}\n", ["#include <stdio.h>"]),
    ],
    ids=["go", "rust", "typescript", "typescript-import-list", "elixir", "c"],
)  # fmt: skip
def test_each_language_keeps_what_opens_with_its_keywords(source: str, expected: list[str]) -> None:
    assert definition_lines(source) == expected


def test_a_numbered_read_keeps_its_own_numbers() -> None:
    """Claude Code's ``Read`` and ``cat -n`` number the lines: the kept line carries the
    number, so the agent can read back just that part."""
    read = "     1→import os\n     2→\n     3→def main() -> None:\n     4→    pass\n"
    assert definition_lines(read) == ["1→import os", "3→def main() -> None:"]
    assert definition_lines("     7\tclass Cat:\n     8\t    x = 1\n") == ["7\tclass Cat:"]


def test_keywords_that_are_not_a_definition_are_not_kept() -> None:
    text = "type(x).name\nobject.method()\nimported = 1\nusers = []\n# import os\n"
    assert definition_lines(text) == []


def test_a_long_signature_is_clipped() -> None:
    line = "def f(" + ", ".join(f"argument_{n}: int" for n in range(30)) + "):"
    (kept,) = definition_lines(line)
    assert len(kept) == LINE_WIDTH
    assert kept.endswith("…")
    assert line.startswith(kept[:-1])


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("src/app.py", True), ("C:\\repo\\Main.JAVA", True), ("lib/x.ex", True),
        ("web/App.tsx", True), ("README.md", False), ("config.yaml", False),
        ("Makefile", False), (".py", False), ("notes.txt", False),
    ],
)  # fmt: skip
def test_a_source_file_is_named_by_its_suffix(path: str, source: bool) -> None:
    assert is_source_file(path) is source


def test_all_definitions_that_fit_are_shown_under_the_plain_heading() -> None:
    shown = definitions(PYTHON, 1_000)
    assert shown == HEADING + "".join(f"\n{line}" for line in definition_lines(PYTHON))


def test_the_first_that_fit_are_shown_and_the_heading_says_how_many_of_how_many() -> None:
    shown = definitions(PYTHON, 120)
    assert shown.startswith(FIRST_OF.format(shown=2, total=6))
    assert shown.split("\n")[2:] == ["import re", "from collections import OrderedDict"]


def test_nothing_when_nothing_is_defined_or_nothing_fits() -> None:
    assert definitions("just prose\n", 300) == ""
    assert definitions(PYTHON, 0) == ""
    assert definitions("def " + "x" * 200, 60) == ""


LINES = st.lists(
    st.one_of(
        st.sampled_from(["import os", "def f(x):", "    return x", "class A:", "", "x = 1"]),
        st.text(st.characters(codec="utf-8"), max_size=40).map(lambda s: "def " + s),
    ),
    max_size=40,
)


@given(LINES, st.integers(min_value=0, max_value=600))
def test_definitions_fit_their_budget_and_show_only_lines_of_the_text(
    lines: list[str], budget: int
) -> None:
    text = "\n".join(lines)
    shown = definitions(text, budget)
    assert len(shown) <= budget
    stripped = {line.strip() for line in text.splitlines()}
    for line in shown.split("\n")[2:]:
        assert line in stripped or (line.endswith("…") and len(line) == LINE_WIDTH)


def test_a_crlf_file_keeps_its_lines_without_the_carriage_return() -> None:
    assert definition_lines("import os\r\nclass A:\r\n    x = 1\r\n") == ["import os", "class A:"]
