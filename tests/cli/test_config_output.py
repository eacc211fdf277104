"""``chatcli-mw config`` prints the effective policy to be saved and edited: its output,
saved as it is, loads and validates as a policy, and is the same policy (issue 36, item
11: price patterns such as ``*claude-fable-5*`` were written unquoted, and ``*`` starts a
YAML alias)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from locations import REPO

import middleware
from middleware.cli.app import main

SCRIPT = Path(sys.executable).parent / "chatcli-mw"
PRESETS = sorted(f"preset:{p.stem}" for p in (REPO / "policies" / "presets").glob("*.yaml"))


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )


def loaded(path: str | Path | None) -> middleware.Policy:
    return middleware.load_policy(path, env={}, dotenv_path=False)


def printed(args: list[str]) -> tuple[int, str]:
    """What ``chatcli-mw ARGS`` exits with and prints, run in this process."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(args)
    return code, out.getvalue()


@pytest.mark.parametrize("origin", [False, True], ids=["plain", "show-origin"])
@pytest.mark.parametrize("policy", [None, *PRESETS], ids=lambda p: p or "default")
def test_config_output_loads_and_validates_as_the_same_policy(
    policy: str | None, origin: bool, tmp_path: Path
) -> None:
    args = ["config", *(["--policy", policy] if policy else []), *(["--show-origin"] * origin)]
    code, shown = printed(args)
    assert code == 0
    saved = tmp_path / "effective.yaml"
    saved.write_text(shown, encoding="utf-8")
    assert printed(["validate", str(saved)])[0] == 0
    assert loaded(saved).to_dict() == loaded(policy).to_dict()


def test_the_installed_command_prints_a_policy_its_validate_accepts(tmp_path: Path) -> None:
    """The same, through the installed script, from a folder outside the checkout with
    nothing of the caller's environment."""
    shown = run("config", "--show-origin", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    saved = tmp_path / "effective.yaml"
    saved.write_text(shown.stdout, encoding="utf-8")
    checked = run("validate", str(saved), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert loaded(saved).to_dict() == loaded(None).to_dict()
    assert shown.stdout == printed(["config", "--show-origin"])[1]


#: Keys and texts a YAML writer must quote or escape: indicators, YAML 1.1 booleans and
#: nulls, numbers, line breaks YAML folds (NEL, LS, PS), characters it refuses raw.
AWKWARD = st.one_of(
    st.sampled_from([
        "*claude-fable-5*", "&anchor", "!tag", "on", "yes", "No", "null", "~", "1e3", "0x1F",
        "12:30", "- item", "? key", "a: b", "a #b", "#x", "[x]", "{x}", "'q'", '"q"', "|", ">",
        "%x", "@x", "`x`", " lead", "trail ", "", "2001-12-14", "a\nb", "\x85", "\u2028",
        "\u2029", "\x7f", "\x00", "\ufeffbom", "\ufffe", "\t", "é—ü", "\U0001f600",
    ]),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=12),
)  # fmt: skip


PRICE_KEYS = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tool=AWKWARD, pattern=AWKWARD, text=AWKWARD, price=st.floats(1e-12, 1e6))
def test_config_output_keeps_any_tool_name_price_pattern_and_text(
    tool: str, pattern: str, text: str, price: float, tmp_path: Path
) -> None:
    """A policy whose tool names, price patterns and texts are anything a policy accepts
    is printed by ``config`` as YAML that loads back to the same policy."""
    source = tmp_path / "policy.yaml"
    source.write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "tools": {tool: {"max_chars": 1000}},
                "ledger": {"prices": {pattern: dict.fromkeys(PRICE_KEYS, price)}},
                "pairing": {"missing_result_text": text or "-"},
            },
            allow_unicode=True,
        ),
        encoding="utf-8",
    )
    code, shown = printed(["config", "--policy", str(source), "--show-origin"])
    assert code == 0
    saved = tmp_path / "effective.yaml"
    saved.write_text(shown, encoding="utf-8")
    assert middleware.validate_policy_file(saved) == []
    assert loaded(saved).to_dict() == loaded(source).to_dict()


def test_a_header_or_origin_with_a_line_break_stays_a_comment(tmp_path: Path) -> None:
    """The header names the policy file and each origin a file: a path holding a line
    break must not end the comment."""
    folder = tmp_path / "odd\nname: [1"
    folder.mkdir()
    source = folder / "policy.yaml"
    source.write_text("version: 1\nbudget:\n  max_result_chars: 30000\n", encoding="utf-8")
    shown = run("config", "--policy", str(source), "--show-origin", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    saved = tmp_path / "effective.yaml"
    saved.write_text(shown.stdout, encoding="utf-8")
    assert loaded(saved).to_dict() == loaded(source).to_dict()
    assert os.fspath(source).replace("\n", "\\n") in shown.stdout


#: A password and a token the tests check are never printed.
PASSWORD = "pw-Hunter2-secret"
TOKEN = "recall-token-0123456789"


@pytest.mark.parametrize(
    "form", [[], ["--show-origin"], ["--json"], ["--json", "--show-origin"]], ids=str
)
def test_config_shows_no_password_of_an_upstream_and_no_token(
    form: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43, item 11: an upstream URL's password, from a policy file or the
    environment, and the tokens are never printed; what is printed still loads as a
    policy (without the credentials)."""
    source = tmp_path / "policy.yaml"
    source.write_text(yaml.safe_dump({"version": 1, "proxy": {
        "upstreams": {"gemini": f"https://gw:{PASSWORD}@gateway.internal/google"},
        "anthropic_upstream": f"https://{PASSWORD}@gateway.internal/anthropic",
        "recall_token": TOKEN,
    }}), encoding="utf-8")  # fmt: skip
    monkeypatch.setenv("CHATCLI_PROXY__UPSTREAMS__OPENAI", f"http://me:{PASSWORD}@10.0.0.5:8000")
    code, shown = printed(["config", "--policy", str(source), *form])
    assert code == 0
    assert PASSWORD not in shown and TOKEN not in shown
    assert "https://gw:***@gateway.internal/google" in shown
    assert "http://me:***@10.0.0.5:8000" in shown and "https://***@gateway.internal" in shown
    if "--json" not in form:
        saved = tmp_path / "effective.yaml"
        saved.write_text(shown, encoding="utf-8")
        assert middleware.validate_policy_file(saved) == []
        assert loaded(saved).get("proxy.recall_token") is None


def test_a_refused_upstream_url_is_named_without_its_password(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CHATCLI_PROXY__UPSTREAMS__OPENAI", f"ftp://me:{PASSWORD}@10.0.0.5")
    assert main(["config"]) == 2
    said = capsys.readouterr().err
    assert "CHATCLI_PROXY__UPSTREAMS__OPENAI" in said and "ftp://me:***@10.0.0.5" in said
    assert PASSWORD not in said
