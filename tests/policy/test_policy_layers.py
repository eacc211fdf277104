"""Policy loading: layers and precedence, extends, errors with locations, environment."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

import middleware
from middleware import PolicyError, load_policy
from middleware.policy import Override
from middleware.policy.resources import data_dir, default_policy_path, policy_schema_path

NO_ENV: dict[str, str] = {}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load(path: Path | None = None, **kwargs: Any) -> middleware.Policy:
    kwargs.setdefault("env", NO_ENV)
    kwargs.setdefault("dotenv_path", False)
    return load_policy(path, **kwargs)


def test_precedence_default_file_dotenv_env_override(tmp_path: Path) -> None:
    policy_path = write(tmp_path, "p.yaml", "version: 1\nbudget:\n  max_result_chars: 11000\n")
    dotenv = write(tmp_path, ".env", "CHATCLI_BUDGET__MAX_RESULT_CHARS=12000\n")
    key = "budget.max_result_chars"
    assert load().get(key) == 5_000
    assert load(policy_path).get(key) == 11_000
    assert load(policy_path, dotenv_path=dotenv).get(key) == 12_000
    env = {"CHATCLI_BUDGET__MAX_RESULT_CHARS": "13000"}
    assert load(policy_path, dotenv_path=dotenv, env=env).get(key) == 13_000
    top = load(policy_path, dotenv_path=dotenv, env=env, overrides={key: 14_000})
    assert top.get(key) == 14_000
    assert top.origins[key] == "override"
    # An override that names who set it is said so (the console's "set by", an error's).
    named = load(overrides={key: Override(15_000, "command line --cap")})
    assert named.get(key) == 15_000 and named.origins[key] == "command line --cap"
    # A file that sets one key is complete: everything else comes from the default.
    assert load(policy_path).get("budget.turn_budget_chars") == 200_000


def test_origins_say_where_each_value_came_from(tmp_path: Path) -> None:
    policy_path = write(tmp_path, "p.yaml", "version: 1\nbudget:\n  max_result_chars: 11000\n")
    dotenv = write(tmp_path, ".env", "CHATCLI_SPILL__KEEP=true\n")
    env = {"CHATCLI_TOOL_RESULT_BUDGET_CHARS": "150000"}
    policy = load(policy_path, dotenv_path=dotenv, env=env)
    assert policy.origins["budget.max_result_chars"] == f"{policy_path}:3"
    assert policy.origins["spill.keep"] == f".env ({dotenv}) CHATCLI_SPILL__KEEP"
    assert policy.origins["budget.turn_budget_chars"] == "env CHATCLI_TOOL_RESULT_BUDGET_CHARS"
    assert policy.origins["pairing.enabled"] == "default"
    assert policy.origins["name"] == f"{policy_path} (its path: the file sets no name)"
    assert load().origins["name"].startswith(f"default ({default_policy_path()}:")


def test_dotenv_never_touches_os_environ(tmp_path: Path) -> None:
    dotenv = write(tmp_path, ".env", "CHATCLI_BUDGET__ENABLED=false\nOTHER=1\n")
    assert load(dotenv_path=dotenv).get("budget.enabled") is False
    assert "CHATCLI_BUDGET__ENABLED" not in os.environ
    assert "OTHER" not in os.environ


def test_policy_env_var_selects_the_file(tmp_path: Path) -> None:
    policy_path = write(tmp_path, "p.yaml", "version: 1\nname: from-env\n")
    assert load(env={"CHATCLI_POLICY": str(policy_path)}).name == "from-env"


def test_extends_chains_relative_paths_and_default(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    write(
        tmp_path / "base",
        "base.yaml",
        "version: 1\nextends: default\nname: base\n"
        "budget:\n  max_result_chars: 30000\n  turn_budget_chars: 100000\n",
    )
    child = write(
        tmp_path,
        "child.yaml",
        "version: 1\nextends: base/base.yaml\nname: child\nbudget:\n  max_result_chars: 25000\n",
    )
    policy = load(child)
    assert (policy.name, policy.get("budget.max_result_chars")) == ("child", 25_000)
    assert policy.get("budget.turn_budget_chars") == 100_000
    assert "extends" not in policy.data


def test_extends_cycles_and_missing_files_are_errors(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "version: 1\nextends: b.yaml\n")
    b = write(tmp_path, "b.yaml", "version: 1\nextends: a.yaml\n")
    with pytest.raises(PolicyError, match="cycle"):
        load(b)
    missing = write(tmp_path, "m.yaml", "version: 1\nextends: nowhere.yaml\n")
    with pytest.raises(PolicyError, match=r"nowhere\.yaml: cannot read policy"):
        load(missing)


def test_duplicate_keys_are_errors_with_their_line(tmp_path: Path) -> None:
    path = write(tmp_path, "d.yaml", "version: 1\nbudget:\n  enabled: true\n  enabled: false\n")
    with pytest.raises(PolicyError) as info:
        load(path)
    assert str(info.value).startswith(f"{path}:4:3: $.budget.enabled: duplicate key 'enabled'")


def test_unknown_keys_suggest_the_right_one(tmp_path: Path) -> None:
    path = write(tmp_path, "u.yaml", "version: 1\nbudget:\n  max_result_char: 5\n")
    with pytest.raises(PolicyError) as info:
        load(path)
    message = str(info.value)
    assert message.startswith(f"{path}:3:")
    assert "$.budget.max_result_char: unknown key 'max_result_char'" in message
    assert "did you mean 'max_result_chars'?" in message


def test_wrong_types_are_located(tmp_path: Path) -> None:
    path = write(tmp_path, "t.yaml", "version: 1\nbudget:\n  turn_budget_chars: lots\n")
    with pytest.raises(PolicyError) as info:
        load(path)
    assert str(info.value).startswith(f"{path}:3:22: $.budget.turn_budget_chars: 'lots'")
    bad_yaml = write(tmp_path, "y.yaml", "version: 1\nbudget: [\n")
    with pytest.raises(PolicyError, match=r"y\.yaml:3:1: invalid YAML"):
        load(bad_yaml)
    regex = write(tmp_path, "r.yaml", "version: 1\ntext_protocol:\n  pattern: '(unclosed'\n")
    with pytest.raises(PolicyError, match=r"\$\.text_protocol\.pattern: invalid regular"):
        load(regex)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "CHATCLI_TOOL_RESULT_MAX_CHARS",
            "20k",
            "CHATCLI_TOOL_RESULT_MAX_CHARS='20k': expected an integer of at least 256",
        ),
        ("CHATCLI_TOOL_RESULT_BUDGET_CHARS", "-5", "expected an integer of at least 256"),
        ("CHATCLI_MICROCOMPACT_TRUNCATE_TURNS", "abc", "'abc': expected a positive integer"),
        ("CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS", "1e5", "expected a positive integer"),
        ("CHATCLI_MICROCOMPACT_HEAD_CHARS", "20_000", "expected an integer of 0 or more"),
        ("CHATCLI_AGENT_KEEP_TMPDIR", "maybe", "expected true or false"),
        ("CHATCLI_BUDGET__TURN_STRATEGY", "smallest", "expected one of largest_first, even_split"),
        ("CHATCLI_BUDGET__MAX_CHRAS", "5", "did you mean 'max_result_chars'?"),
    ],
)
def test_invalid_environment_values_name_the_variable(name: str, value: str, message: str) -> None:
    with pytest.raises(PolicyError) as info:
        load(env={name: value})
    assert message in str(info.value)
    assert name in str(info.value)


@pytest.mark.parametrize(
    ("name", "value", "key", "expected"),
    [
        ("CHATCLI_TOOL_RESULT_BUDGET_CHARS", "150000", "budget.turn_budget_chars", 150_000),
        ("CHATCLI_TOOL_RESULT_MAX_CHARS", "+25000", "budget.max_result_chars", 25_000),
        ("CHATCLI_MICROCOMPACT_TRUNCATE_TURNS", "3", "microcompact.truncate_turns", 3),
        ("CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS", "6", "microcompact.summarize_turns", 6),
        ("CHATCLI_MICROCOMPACT_HEAD_CHARS", "1500", "microcompact.head_chars", 1500),
        ("CHATCLI_MICROCOMPACT_TAIL_CHARS", "300", "microcompact.tail_chars", 300),
        ("CHATCLI_MICROCOMPACT_MIN_CONTENT", "4000", "microcompact.min_content", 4000),
        ("CHATCLI_AGENT_KEEP_TMPDIR", "TRUE", "spill.keep", True),
        ("CHATCLI_BUDGET__PREVIEW__UNIT", "bytes", "budget.preview.unit", "bytes"),
        ("CHATCLI_SPILL__ROOT", "null", "spill.root", None),
        (
            "CHATCLI_MICROCOMPACT__EXEMPT_TOOLS",
            '["Write"]',
            "microcompact.exempt_tools",
            ("Write",),
        ),
        ("CHATCLI_TOOLS__READ", '{"max_chars": 9000}', "tools.read.max_chars", 9000),
    ],
)
def test_every_alias_and_dunder_variable(name: str, value: str, key: str, expected: Any) -> None:
    assert load(env={name: value}).get(key) == expected


def test_conflicting_alias_and_dunder_spellings_are_an_error() -> None:
    env = {"CHATCLI_TOOL_RESULT_MAX_CHARS": "30000", "CHATCLI_BUDGET__MAX_RESULT_CHARS": "40000"}
    with pytest.raises(PolicyError, match="set only one of them"):
        load(env=env)
    same = {"CHATCLI_TOOL_RESULT_MAX_CHARS": "30000", "CHATCLI_BUDGET__MAX_RESULT_CHARS": "30000"}
    assert load(env=same).get("budget.max_result_chars") == 30_000


def test_other_chatcli_variables_belong_to_the_host_and_are_ignored() -> None:
    env = {"CHATCLI_MAX_PAYLOAD": "5MB", "CHATCLI_COMPRESSION": "lossy", "CHATCLI_PROXY_X": "1",
           "CHATCLI_LOAD_PLUGINS": "", "CHATCLI_HISTORY_REWRITE_PRESSURE": "2"}  # fmt: skip
    assert load(env=env).digest == load().digest


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        # A double underscore is always ours (ChatCLI's names have none): its section must
        # exist, and the message names the one probably meant.
        ("CHATCLI_PROXI__HOST", "0.0.0.0", "no section 'proxi'; did you mean CHATCLI_PROXY__"),
        ("CHATCLI_BUGDET__MAX_RESULT_CHARS", "9000", "did you mean CHATCLI_BUDGET__"),
        ("CHATCLI_FOO__BAR", "x", "the policy has no section 'foo' (sections: budget"),
        # A section and one of its keys joined by one underscore.
        ("CHATCLI_PROXY_HOST", "0.0.0.0", "did you mean CHATCLI_PROXY__HOST?"),
        ("CHATCLI_BUDGET_MAX_RESULT_CHARS", "9000", "did you mean CHATCLI_BUDGET__MAX_RESULT_"),
        # A number too small to tell from 0 is not silently 0.
        ("CHATCLI_MICROCOMPACT__SCHEDULE__REWRITE_COST", "1e-400", "too small to tell from 0"),
    ],
)
def test_an_operators_typo_is_an_error_naming_the_variable(
    variable: str, value: str, said: str
) -> None:
    with pytest.raises(PolicyError, match=re.escape(variable)) as info:
        load(env={variable: value})
    assert said in str(info.value)
    assert (
        load(env={"CHATCLI_MICROCOMPACT__SCHEDULE__REWRITE_COST": "0e5"}).get(
            "microcompact.schedule.rewrite_cost"
        )
        == 0
    )


@given(st.integers(min_value=256, max_value=10**9))
def test_integer_values_round_trip_through_the_environment(value: int) -> None:
    env = {"CHATCLI_BUDGET__TURN_BUDGET_CHARS": str(value)}
    assert load(env=env).get("budget.turn_budget_chars") == value


@given(st.sampled_from(["true", "True", "1", "yes", "on", "false", "FALSE", "0", "no", "off"]))
def test_boolean_spellings(text: str) -> None:
    expected = text.lower() in ("true", "1", "yes", "on")
    assert load(env={"CHATCLI_PAIRING__ENABLED": text}).get("pairing.enabled") is expected


# -- the schema and the shipped policies ---------------------------------------------------


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(policy_schema_path().read_text(encoding="utf-8"))
    return loaded


def test_schema_is_valid_draft7_with_titles_and_descriptions_everywhere() -> None:
    jsonschema.Draft7Validator.check_schema(schema())

    def walk(node: dict[str, Any], where: str) -> None:
        for key, child in node.get("properties", {}).items():
            assert child.get("title"), f"{where}.{key} has no title"
            assert child.get("description"), f"{where}.{key} has no description"
            walk(child, f"{where}.{key}")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{where}.*")
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") is not True, f"{where} allows anything"

    walk(schema(), "$")


@pytest.mark.parametrize("path", sorted(data_dir("policies").rglob("*.yaml")), ids=lambda p: p.name)
def test_shipped_policies_validate_and_name_their_schema(path: Path) -> None:
    first_line = path.read_text(encoding="utf-8").splitlines()[0]
    assert first_line.startswith("# yaml-language-server: $schema=")
    target = (path.parent / first_line.split("$schema=", 1)[1]).resolve()
    assert target == policy_schema_path().resolve()
    assert middleware.validate_policy_file(path) == []


def test_tool_entries_by_exact_name_then_longest_pattern() -> None:
    tools = {
        "mcp_*": {"max_chars": 1000},
        "mcp_git*": {"max_chars": 2000},
        "mcp_github": {"exempt": True},
    }
    policy = load_policy(env={}, dotenv_path=False, overrides={"tools": tools})
    assert policy.tool_entry("mcp_github") == ("mcp_github", {"exempt": True})
    assert policy.tool_entry("mcp_gitlab") == ("mcp_git*", {"max_chars": 2000})
    assert policy.tool_entry("mcp_slack") == ("mcp_*", {"max_chars": 1000})
    assert policy.tool_entry("bash") is None


def test_a_policy_is_named_after_its_own_file_unless_it_names_itself(tmp_path: Path) -> None:
    """Issue 13, item 20: a deployment policy that extends default was called 'default'."""
    plain = write(tmp_path, "prod.yaml", "version: 1\nextends: default\n")
    assert load(plain).name == str(plain)
    on_preset = write(tmp_path, "fast.yaml", "version: 1\nextends: preset:pi\n")
    assert load(on_preset).name == str(on_preset)
    named = write(tmp_path, "n.yaml", "version: 1\nname: team-prod\nextends: prod.yaml\n")
    assert load(named).name == "team-prod"
    assert load().name == "default"
    assert load("preset:pi").name == "pi"
