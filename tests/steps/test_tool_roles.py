"""Which tools read, write, edit or execute has one owner, the built-in ``agent_tools``
plugin (issue 47, item 4): the policy schema's default tool lists and the docs' lists of
the declared tools are checked against its declarations."""

from __future__ import annotations

import re

import pytest
from locations import REPO

from middleware.default_plugins.agent_tools import (
    FILE_TOOLS,
    OTHER_TOOLS,
    ROLE_OF_ACCESS,
    TOOL_ROLES,
    exempt_tools,
    input_clearing_tools,
)
from middleware.policy.schema import policy_schema

DOCS = REPO / "docs"


def schema_default(*keys: str) -> list[str]:
    node = policy_schema()
    for key in keys:
        node = node["properties"][key]
    default: list[str] = node["default"]
    return default


def names(text: str) -> set[str]:
    """The tool names ``text`` quotes (```Write```), not commands (```sed -i```)."""
    return set(re.findall(r"`([A-Za-z_]+)`", text))


def test_a_tool_declared_twice_has_one_role() -> None:
    both = set(FILE_TOOLS) & set(OTHER_TOOLS)
    disagree = {
        n: (FILE_TOOLS[n].action, OTHER_TOOLS[n])
        for n in both
        if ROLE_OF_ACCESS[FILE_TOOLS[n].action] != OTHER_TOOLS[n]
    }
    assert not disagree


def test_gemini_clis_writes_and_edits_are_writes_and_edits() -> None:
    assert (TOOL_ROLES["write_file"], TOOL_ROLES["replace"]) == ("write", "edit")
    assert {"write_file", "replace", "apply_patch"} <= input_clearing_tools() & exempt_tools()


def test_the_schemas_inputs_tools_are_the_write_and_edit_tools() -> None:
    default = schema_default("microcompact", "inputs", "tools")
    assert len(set(default)) == len(default)
    assert set(default) == input_clearing_tools()


def test_the_schemas_exempt_tools_are_the_write_edit_and_generic_execute_tools() -> None:
    default = schema_default("microcompact", "exempt_tools")
    assert len(set(default)) == len(default)
    assert set(default) == exempt_tools()
    shells = {name for name, access in FILE_TOOLS.items() if access.action == "shell"}
    assert not shells & exempt_tools()  # an agent's shell output is what compaction is for


def test_the_docs_name_the_plugins_tools() -> None:
    text = (DOCS / "plugins.md").read_text(encoding="utf-8")
    start = text.index("The built-in `agent_tools` plugin declares")
    paragraph = text[start : text.index("\n\n", start)]
    assert names(paragraph) - {"agent_tools", "tool_result_cap"} == set(FILE_TOOLS)


@pytest.mark.parametrize(
    ("opening", "actions"),
    [("or the\n  file is written (", ("write", "patch")), ("An edit changes", ("edit", "patch"))],
)
def test_the_docs_name_the_tools_that_write_and_edit_files(
    opening: str, actions: tuple[str, ...]
) -> None:
    text = (DOCS / "microcompact.md").read_text(encoding="utf-8")
    start = text.index(opening)
    listed = text[start : text.index(")", start)]
    assert names(listed) == {n for n, access in FILE_TOOLS.items() if access.action in actions}


def test_the_docs_give_the_schemas_inputs_tools() -> None:
    text = " ".join((DOCS / "microcompact.md").read_text(encoding="utf-8").split())
    start = text.index("in a call of one of `inputs.tools` (")
    listed = text[start : text.index(")", start)]
    quoted = re.findall(r"`([A-Za-z_]+)`", listed.split("(", 1)[1].split(":")[0])
    assert quoted == schema_default("microcompact", "inputs", "tools")
