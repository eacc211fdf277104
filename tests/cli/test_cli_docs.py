"""docs/cli.md documents every command and option; every command's --help has examples
and every option a help text."""

from __future__ import annotations

import argparse

import pytest
from locations import REPO

from middleware.cli.app import build_parser

DOCS = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
SUBPARSERS = next(
    a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
).choices


def section(command: str) -> str:
    start = DOCS.index(f"## `chatcli-mw {command}`")
    end = DOCS.find("\n## ", start + 1)
    return DOCS[start : end if end != -1 else len(DOCS)]


@pytest.mark.parametrize("command", sorted(SUBPARSERS))
def test_every_command_and_option_is_documented(command: str) -> None:
    text = section(command)
    assert f"| [`{command}`](#chatcli-mw-{command}) |" in DOCS
    assert f"chatcli-mw {command}" in text.split("```sh", 1)[1], "give an example"
    for action in SUBPARSERS[command]._actions:
        for option in action.option_strings:
            if option not in ("-h", "--help"):
                assert option in text, f"docs/cli.md does not mention {command} {option}"


@pytest.mark.parametrize("command", sorted(SUBPARSERS))
def test_every_command_help_has_examples_and_every_option_a_help_text(command: str) -> None:
    parser = SUBPARSERS[command]
    assert parser.epilog and parser.epilog.startswith("examples:\n")
    assert parser.description
    for action in parser._actions:
        assert action.help, f"{command} {action.option_strings or action.dest} has no help"
