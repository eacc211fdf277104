"""docs/policy.md is the schema's reference, current, and what it says about environment
variables is true."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from locations import REPO

from middleware import PolicyError, load_policy
from middleware.policy.env import ALIASES, env_name, env_overrides
from middleware.policy.reference import render_markdown
from middleware.policy.resources import policy_schema_path
from middleware.policy.schema import DOCUMENT_KEYS, default_of, keys

DOCS = REPO / "docs" / "policy.md"


def test_docs_policy_md_is_current() -> None:
    assert DOCS.read_text(encoding="utf-8") == render_markdown(), (
        "docs/policy.md is stale: run `chatcli-mw schema --markdown > docs/policy.md`"
    )


def test_every_key_has_its_section_in_the_reference() -> None:
    text = render_markdown()
    for key in keys():
        assert f"### `{key.dotted}`" in text or f"## `{key.dotted}`" in text
        if key.dotted not in DOCUMENT_KEYS | {"tools"}:
            assert f"`{env_name(key.dotted)}`" in text
    assert "`CHATCLI_TOOLS__<TOOL>__<KEY>`" in text


SETTABLE = [k for k in keys() if k.dotted not in DOCUMENT_KEYS and k.dotted != "tools"]


@pytest.mark.parametrize("key", SETTABLE, ids=lambda key: key.dotted)
def test_the_documented_variable_sets_its_key(key: object) -> None:
    dotted = key.dotted  # type: ignore[attr-defined]
    default = key.default  # type: ignore[attr-defined]
    raw = default if isinstance(default, str) else json.dumps(default)
    name = env_name(dotted)
    assert env_overrides({name: raw}, "env")[dotted][0] == default
    assert load_policy(env={name: raw}, dotenv_path=False).origins[dotted] == f"env {name}"


def test_chatcli_names_and_tool_entries_from_the_environment() -> None:
    for alias, dotted in ALIASES.items():
        default = default_of(dotted)
        raw = json.dumps(default)
        assert env_overrides({alias: raw}, "env")[dotted] == (default, f"env {alias}")
    policy = load_policy(env={"CHATCLI_TOOLS__BASH__MAX_CHARS": "30000"}, dotenv_path=False)
    assert policy.tool_entry("bash") == ("bash", {"max_chars": 30000})


def test_schema_command_prints_the_schema_its_path_and_the_reference() -> None:
    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "middleware", "schema", *args],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    assert json.loads(run())["title"] == "chatcli-middleware policy"
    assert run("--path").strip() == str(policy_schema_path())
    assert run("--markdown") == render_markdown()


def test_nested_tool_keys_and_misspelt_keys_from_the_environment() -> None:
    env = {
        "CHATCLI_TOOLS__READ__LINES": "head",
        "CHATCLI_TOOLS__READ__NOTICES__POINTER": "[at {path}]",
    }
    policy = load_policy(env=env, dotenv_path=False)
    assert policy.tool_entry("read") == (
        "read",
        {"lines": "head", "notices": {"pointer": "[at {path}]"}},
    )
    for variable, message in [
        (
            "CHATCLI_BUDGET__MAX_RESULT_CHAR",
            "budget has no key 'max_result_char'; did you mean 'max_result_chars'?",
        ),
        ("CHATCLI_BUDGET__PREVIEW__HED", "budget.preview has no key 'hed'; did you mean 'head'?"),
        ("CHATCLI_TOOLS__READ__NOTICES__HEAD", "tools.read.notices has no key 'head'"),
    ]:
        with pytest.raises(PolicyError, match=re.escape(f"{variable}: {message}")):
            load_policy(env={variable: "5"}, dotenv_path=False)
