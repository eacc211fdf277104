"""Every way a policy can be bad ends in one located ``PolicyError`` (issue #13, item 16):
no ``ConstructorError``, ``UnicodeDecodeError``, ``RecursionError``, ``TypeError`` or
``ValueError``; no NaN or infinity; no quoting of a file that is not a policy."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware import PolicyError, load_policy, validate_policy_file

SECRET = "hunter2-Sup3rSecret"


def write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def load(path: Path | None = None, **kwargs: Any) -> middleware.Policy:
    kwargs.setdefault("env", {})
    kwargs.setdefault("dotenv_path", False)
    return load_policy(path, **kwargs)


def one_line(error: PolicyError) -> str:
    message = str(error)
    assert "\n" not in message, message
    assert len(message) < 400, message
    return message


@pytest.mark.parametrize(
    ("text", "where", "fragment"),
    [
        (
            "version: 1\nname: !!python/object/apply:os.system ['true']\n",
            "2:7",
            "unsupported YAML tag",
        ),
        ("version: 1\nname: !custom x\n", "2:7", "unsupported YAML tag"),
        (b"version: 1\nname: caf\xe9\n", "2:10", "not UTF-8"),
        ("version: 1\n1: one\n", "2:1", "a key must be text"),
        ("version: 1\n? [a, b]\n: two\n", "2:3", "a key must be text"),
        ("version: 1\ntools:\n  null: {exempt: true}\n", "3:3", "a key must be text"),
        ("version: 1\nbudget:\n  max_result_chars: " + "9" * 5000 + "\n", "3:21", "at most 2**53"),
        ("version: 1\nbudget:\n  max_result_chars: 9007199254740993\n", "3:21", "at most 2**53"),
        (
            "version: 1\nbudget:\n  context_aware:\n    chars_per_token: .nan\n",
            "4:22",
            "not a finite number",
        ),
        (
            "version: 1\nbudget:\n  context_aware:\n    chars_per_token: .inf\n",
            "4:22",
            "not a finite number",
        ),
        (
            "version: 1\nbudget:\n  context_aware:\n    chars_per_token: 1.0e+309\n",
            "4:22",
            "not a finite number",
        ),
        ("version: 1\nname: 2026-11-23\n", "2:7", "quote it"),
        ("version: 1\nname: !!binary aGVsbG8=\n", "2:7", "not a policy value"),
        ("version: 1\nname: !!set {a, b}\n", "2:7", "not a policy value"),
        ("version: 1\nname: a\x00b\n", "2:8", "invalid YAML"),
        ("version: 1\n---\nversion: 1\n", "2:1", "invalid YAML"),
        ("version: 1\n<<: 5\n", "2:5", "invalid YAML"),
    ],
    ids=[
        "python-tag",
        "local-tag",
        "latin-1",
        "int-key",
        "list-key",
        "null-key",
        "huge-int",
        "int-over-2**53",
        "nan",
        "inf",
        "1e309",
        "date",
        "binary",
        "set",
        "nul",
        "two-docs",
        "bad-merge",
    ],
)
def test_a_bad_file_is_a_located_policy_error(
    tmp_path: Path, text: str | bytes, where: str, fragment: str
) -> None:
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(PolicyError) as info:
        load(path)
    message = one_line(info.value)
    assert message.startswith(f"{path}:{where}: "), message
    assert fragment in message
    (error,) = validate_policy_file(path)
    assert str(error) == message


def test_the_same_problems_in_an_extends_target_name_that_file(tmp_path: Path) -> None:
    write(tmp_path, "base.yaml", "version: 1\nname: !!python/name:os.system\n")
    child = write(tmp_path, "child.yaml", "version: 1\nextends: base.yaml\n")
    with pytest.raises(PolicyError) as info:
        load(child)
    assert one_line(info.value).startswith(f"{tmp_path / 'base.yaml'}:2:7: ")


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        ("CHATCLI_BUDGET__CONTEXT_AWARE__CHARS_PER_TOKEN", "nan", "expected a finite number"),
        ("CHATCLI_BUDGET__CONTEXT_AWARE__CHARS_PER_TOKEN", "inf", "expected a finite number"),
        ("CHATCLI_BUDGET__CONTEXT_AWARE__CHARS_PER_TOKEN", "-Infinity", "expected a finite"),
        ("CHATCLI_BUDGET__CONTEXT_AWARE__CHARS_PER_TOKEN", "1e309", "at most 2**53"),
        ("CHATCLI_BUDGET__CONTEXT_AWARE__CHARS_PER_TOKEN", "1_000", "expected a finite number"),
        ("CHATCLI_MICROCOMPACT__SCHEDULE__CHARS_PER_TOKEN", "NaN", "expected a finite number"),
        ("CHATCLI_BUDGET__MAX_RESULT_CHARS", "9" * 5000, "at most 2**53"),
        ("CHATCLI_BUDGET__MAX_RESULT_CHARS", str(2**60), "at most 2**53"),
        ("CHATCLI_MICROCOMPACT__EXEMPT_TOOLS", "[" * 5000 + "]" * 5000, "nested more than"),
        ("CHATCLI_TOOLS__READ", '{"max_chars": NaN}', "not a finite number"),
        ("CHATCLI_TOOLS__READ", '{"max_chars": 1e400}', "not a finite number"),
        ("CHATCLI_TOOLS__READ", '{"max_chars": ' + "9" * 5000 + "}", "at most 2**53"),
    ],
)
def test_bad_environment_values_name_the_variable(variable: str, value: str, fragment: str) -> None:
    with pytest.raises(PolicyError) as info:
        load(env={variable: value})
    message = one_line(info.value)
    assert message.startswith(f"{variable}=")
    assert fragment in message


def test_the_digit_bound_counts_only_significant_digits() -> None:
    env = {"CHATCLI_BUDGET__MAX_RESULT_CHARS": "0" * 30 + "30000"}
    assert load(env=env).get("budget.max_result_chars") == 30_000


def test_a_non_finite_environment_value_never_reaches_a_request(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A result of 50,000,000 characters went through when the budget step failed on
    ``chars_per_token = inf`` on every request; now the pipeline is never built."""
    monkeypatch.chdir(tmp_path)  # no stray ./.env
    monkeypatch.setenv("CHATCLI_BUDGET__CONTEXT_AWARE__ENABLED", "true")
    monkeypatch.setenv("CHATCLI_BUDGET__CONTEXT_AWARE__CHARS_PER_TOKEN", "1e309")
    with pytest.raises(PolicyError, match="CHATCLI_BUDGET__CONTEXT_AWARE__CHARS_PER_TOKEN"):
        middleware.Pipeline.from_policy(None)


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"budget.context_aware.chars_per_token": math.nan}, "$.budget.context_aware."),
        ({"budget.context_aware.chars_per_token": math.inf}, "not a finite number"),
        ({"budget.max_result_chars": 2**64}, "at most 2**53"),
        ({"tools": {1: {"exempt": True}}}, "a key must be text"),
        ({"name": object()}, "not a policy value"),
        ({"description": b"bytes"}, "not a policy value"),
        ({1: 2}, "dotted key names"),
    ],
)
def test_bad_overrides_name_the_key(overrides: dict[Any, Any], fragment: str) -> None:
    with pytest.raises(PolicyError) as info:
        load(overrides=overrides)
    message = one_line(info.value)
    assert fragment in message
    assert "override" in message


def test_a_recursive_override_is_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(PolicyError, match="nested more than"):
        load(overrides={"microcompact.exempt_tools": loop})


@pytest.mark.parametrize("how", ["path", "extends", "validate"])
def test_a_file_that_is_not_a_policy_is_never_quoted(tmp_path: Path, how: str) -> None:
    shadow = write(
        tmp_path, "shadow", f"root:$6${SECRET}$Zx81:19000:0:99999:7:::\ndaemon:*:19000:0:::\n"
    )
    child = write(tmp_path, "child.yaml", f"version: 1\nextends: {shadow}\n")
    if how == "validate":
        (error,) = validate_policy_file(shadow)
    else:
        with pytest.raises(PolicyError) as info:
            load(shadow if how == "path" else child)
        error = info.value
    message = one_line(error)
    assert message.startswith(f"{shadow}:1:1: ")
    problem = message.removeprefix(f"{shadow}:1:1: ")
    assert problem.startswith("not a policy")
    assert "root" not in problem
    assert SECRET not in problem


@pytest.mark.parametrize(
    "text",
    [
        f"token: *{SECRET}\n",
        f"{SECRET}: [unclosed\n",
        f"key: !{SECRET} value\n",
        f"- {SECRET}\n- !!python/object:{SECRET} {{}}\n",
        f"a: {SECRET}\n  b: c\n",
        f"a: &{SECRET} 1\nb: &{SECRET} 2\n",
        f'version: 1\nname: "{SECRET}\\q"\n',
    ],
    ids=["alias", "flow", "tag", "python-tag", "indent", "anchor", "escape"],
)
def test_yaml_errors_quote_no_content(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "broken", text)
    with pytest.raises(PolicyError) as info:
        load(path)
    message = one_line(info.value)
    assert message.startswith(f"{path}:")
    assert SECRET not in message


def test_schema_messages_about_a_huge_value_stay_short(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", "version: 1\nbudget:\n  max_result_chars: " + "x" * 500_000)
    with pytest.raises(PolicyError) as info:
        load(path)
    message = one_line(info.value)
    assert message.startswith(f"{path}:3:21: $.budget.max_result_chars: 'xxxx")
    assert "is not of type 'integer'" in message


def test_the_command_line_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", "version: 1\nname: !!python/object/apply:os.system ['true']\n")
    proc = subprocess.run(
        [sys.executable, "-m", "middleware", "config", "--policy", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1
    assert f"{path}:2:7: " in proc.stderr
