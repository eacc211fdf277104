"""The third-party plugin in examples/ installs, is listed, and its caps apply."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from locations import EXAMPLES, REPO

SCRIPT = Path(sys.executable).parent / "chatcli-mw"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q",
         "--target", str(target), str(REPO / "examples" / "sqltools-plugin")],
        check=True, capture_output=True,
    )  # fmt: skip
    return target


def run(
    site: Path, *args: str, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), **env}
    return subprocess.run(
        [str(SCRIPT), *args], input=stdin, capture_output=True, text=True, check=False, env=environ
    )


@pytest.mark.slow
def test_the_installed_plugin_is_listed_with_its_caps(plugin_site: Path) -> None:
    listed = json.loads(run(plugin_site, "plugins", "--json", "--tool", "sql_query").stdout)
    (plugin,) = [p for p in listed["plugins"] if p["name"] == "sqltools"]
    assert (plugin["distribution"], plugin["version"]) == ("chatcli-mw-sqltools", "1.0.0")
    assert plugin["hooks"] == ["detect_content_type", "tool_result_cap"]
    assert listed["tool_caps"]["sql_query"] == {
        "plugin": "sqltools",
        "max_chars": 40000,
        "exempt": False,
    }
    blocked = json.loads(
        run(plugin_site, "plugins", "--json", CHATCLI_BLOCK_PLUGINS="sqltools").stdout
    )
    assert "sqltools" not in {p["name"] for p in blocked["plugins"]}
    none = json.loads(run(plugin_site, "plugins", "--json", CHATCLI_LOAD_PLUGINS="").stdout)
    assert all(p["builtin"] for p in none["plugins"])


@pytest.mark.slow
def test_its_caps_apply_to_processed_histories(plugin_site: Path) -> None:
    rows = "".join(f"| {i} | customer {i} |\n" for i in range(2500))  # ~50,000 chars
    history = [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "q", "type": "function", "function": {"name": "sql_query", "arguments": "{}"}},
            {"id": "e", "type": "function",
             "function": {"name": "sql_explain", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "q", "content": rows},
        {"role": "tool", "tool_call_id": "e", "content": "plan " * 20000},
    ]  # fmt: skip
    done = run(plugin_site, "process", "-", "--report", "json", stdin=json.dumps(history))
    assert done.returncode == 0, done.stderr
    (action,) = json.loads(done.stderr)["actions"]
    assert (action["tool_call_id"], action["detail"]["cap"]) == ("q", 40000)
    assert action["detail"]["cap_source"] == "plugin sqltools"


def test_the_agent_loop_example_admits_and_stops_the_runaway_loop() -> None:
    script = EXAMPLES / "agent_loop.py"
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == [f"turn 0: read_{i} kept 26,666 chars (budget 26,666)" for i in range(3)]
    assert lines[-1] == (
        "turn 6: stopped: tool loop detected: web_search called 6 times alike, over the limit of 5"
    )
