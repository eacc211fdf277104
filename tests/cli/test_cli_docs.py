"""docs/cli.md documents every command and option; every command's --help has examples
and every option a help text."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from locations import REPO

from middleware.cli.app import build_parser
from middleware.formats import CODECS

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


README = (REPO / "README.md").read_text(encoding="utf-8")


def readme_row(command: str) -> str:
    """The command cell of the README's command table for ``command``."""
    found = re.search(rf"^\| `chatcli-mw {command}\b(.*?)` \|", README, re.MULTILINE)
    assert found, f"the README's command table has no row for chatcli-mw {command}"
    return found.group(1)


@pytest.mark.parametrize("command", sorted(SUBPARSERS))
def test_the_readme_table_names_every_option_of_every_command(command: str) -> None:
    row = readme_row(command)
    for action in SUBPARSERS[command]._actions:
        for option in action.option_strings:
            if option not in ("-h", "--help"):
                assert re.search(rf"{re.escape(option)}\b", row), (
                    f"README.md's row for {command} does not name {option}"
                )


def test_the_help_examples_that_name_a_policy_run_anywhere(tmp_path: Path) -> None:
    """The top-level help's example of a policy by name (issue 38, item 4: it named
    policies/baselines/chatcli.yaml, which only a checkout has) runs as written in a
    folder holding nothing but the session it names."""
    examples = build_parser().epilog or ""
    (line,) = (line for line in examples.splitlines() if "--policy" in line and "simulate" in line)
    argv = shlex.split(line.split("   ")[0].strip())
    assert argv[0] == "chatcli-mw"
    asked = {"role": "user", "content": "List the files."}
    said = {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "None."}]}
    lines = [{"type": "user", "message": asked}, {"type": "assistant", "message": said}]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (tmp_path / "session.jsonl").write_text(text, encoding="utf-8")
    script = Path(sys.executable).parent / argv[0]
    done = subprocess.run(
        [str(script), *argv[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cost.png").read_bytes().startswith(b"\x89PNG")


def test_the_readme_names_every_format_and_every_agent_set_up() -> None:
    """The README's Python API names every wire format ``process`` takes, and its proxy
    section every agent docs/proxy.md sets up (issue 38, item 4: Gemini was missing)."""
    (api,) = (block for block in README.split("```python\n") if "pipe.process(messages" in block)
    api = api.split("```", 1)[0]
    for name in CODECS:
        assert f'"{name}"' in api, f"README.md's process() example does not name {name!r}"
    proxy_docs = (REPO / "docs" / "proxy.md").read_text(encoding="utf-8")
    setups = proxy_docs.split("\n## Setups\n", 1)[1].split("\n## ", 1)[0]
    headings = re.findall(r"^### (.+)$", setups, re.MULTILINE)
    agents = [h for h in headings if h not in ("Any SDK client", "Which policy")]
    section = README.split("\n## Agents you cannot edit", 1)[1].split("\n## ", 1)[0]
    assert len(agents) >= 4
    for agent in agents:
        assert agent in section, f"README.md's proxy section does not name {agent}"
