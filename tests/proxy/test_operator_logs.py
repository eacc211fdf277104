"""Operators' logs (issue 44, item 6): with ``proxy.log.format: json`` every line
``chatcli-mw serve`` writes on stderr is one JSON object (the access lines, ours, uvicorn's,
a traceback), so a log pipeline (``jq``, a collector) reads the whole stream; ``text`` keeps
the lines as they were; ``proxy.log.level`` follows a hot reload."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette", reason="the proxy tests need the [proxy] extra")

from proxy_stack import serve_process
from stand_in import Provider
from waiting import wait_for

#: A third-party plugin whose every call fails, so the proxy logs a traceback (the
#: request is still served: a plugin's failure is never the reason it fails).
BROKEN_PLUGIN = """\
from middleware import hookimpl


@hookimpl
def tool_result_cap(tool_name):
    raise RuntimeError("a broken plugin\\nsays so on two lines")
"""

#: A conversation with a tool result, so the plugin's tool_result_cap is asked.
WITH_A_RESULT = {
    "model": "m",
    "messages": [
        {"role": "user", "content": "list it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt\nb.txt"},
    ],
}
#: A history the pipeline cannot read: forwarded as it came, said at level info.
UNREADABLE = {"model": "m", "messages": [42]}
HEADERS = {"authorization": "Bearer k"}
#: What every JSON line carries.
STANDARD = ("time", "level", "logger", "message")


@pytest.fixture
def broken_plugin(tmp_path: Path) -> dict[str, str]:
    return installed_broken_plugin(tmp_path / "site")


def installed_broken_plugin(site: Path) -> dict[str, str]:
    """The environment under which ``chatcli-mw serve`` loads :data:`BROKEN_PLUGIN` (a
    module and its distribution's entry point, in ``site`` on ``PYTHONPATH``)."""
    site.mkdir()
    (site / "broken_logs_plugin.py").write_text(BROKEN_PLUGIN, encoding="utf-8")
    dist = site / "broken_logs_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-logs-plugin\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        "[chatcli_middleware]\nbroken = broken_logs_plugin\n", encoding="utf-8"
    )
    paths = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(paths)}


def drive(url: str) -> None:
    """Requests that make the proxy log each kind of line: an access line per request, a
    warning of ours (a Host the proxy does not answer to), uvicorn's own warning (an
    upgrade it does not support), a plugin's traceback, a line at level info."""
    answered = httpx.post(
        url + "/v1/chat/completions", json=WITH_A_RESULT, headers=HEADERS, timeout=60
    )
    assert answered.status_code == 200, answered.text
    refused = httpx.get(url + "/healthz", headers={"host": "evil.example"}, timeout=30)
    assert refused.status_code == 421
    upgraded = httpx.get(
        url + "/healthz", headers={"connection": "upgrade", "upgrade": "h2c"}, timeout=30
    )
    assert upgraded.status_code == 200
    unread = httpx.post(url + "/v1/chat/completions", json=UNREADABLE, headers=HEADERS, timeout=60)
    assert unread.status_code != 502, unread.text


def driven(
    upstream: str, tmp_path: Path, env: dict[str, str], overrides: dict[str, Any]
) -> list[str]:
    """The lines a ``chatcli-mw serve`` process wrote on stderr as :func:`drive` drove it,
    once it has stopped (each ended by a newline)."""
    log = tmp_path / "serve.log"
    overrides = {"spill.root": str(tmp_path / "spill"), **overrides}
    with serve_process(upstream, overrides, log=log, env=env) as url:
        drive(url)
        assert wait_for(lambda: log.read_text("utf-8").count('"method": "POST"') >= 2)
    text = log.read_text(encoding="utf-8")
    assert text.endswith("\n"), text[-200:]
    return text.splitlines()


def objects(lines: list[str]) -> list[dict[str, Any]]:
    """Each line as the one JSON object it must be (strict JSON: no NaN)."""
    parsed = []
    for number, line in enumerate(lines, 1):
        try:
            value = json.loads(line, parse_constant=_refuse)
        except ValueError as exc:
            raise AssertionError(f"line {number} is not JSON ({exc}): {line!r}") from None
        assert isinstance(value, dict), f"line {number} is not an object: {line!r}"
        parsed.append(value)
    return parsed


def _refuse(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def one(records: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """The first record with these fields, whose message contains ``message_has``."""
    has = fields.pop("message_has", "")
    for record in records:
        if all(record.get(k) == v for k, v in fields.items()) and has in record["message"]:
            return record
    raise AssertionError(f"no record {fields} with {has!r}: {records}")


@pytest.mark.slow
def test_with_json_every_line_on_stderr_is_one_object(
    provider: tuple[Provider, str], tmp_path: Path, broken_plugin: dict[str, str]
) -> None:
    lines = driven(provider[1], tmp_path, broken_plugin, {"proxy.log.format": "json"})
    records = objects(lines)
    for record in records:
        assert all(isinstance(record.get(k), str) for k in STANDARD), record
        assert record["level"] in ("debug", "info", "warning", "error", "critical"), record
        when = datetime.strptime(record["time"], "%Y-%m-%dT%H:%M:%S.%f%z")
        assert when.utcoffset() == timedelta(0), record
        assert abs(datetime.now(when.tzinfo) - when) < timedelta(minutes=5)
    one(records, logger="middleware.cli.serve", level="info", message_has="chatcli-mw proxy on")
    # The access line: today's object, its fields at the top beside the standard ones.
    access = one(records, logger="middleware.proxy.access", path="/v1/chat/completions", status=200)
    assert access["message"] == "POST /v1/chat/completions 200"
    assert {"method", "route", "session", "ms", "process_ms", "complete", "billed"} <= set(access)
    assert access["billed"]["input"] > 0 and access["actions"] == {}
    one(records, logger="middleware.proxy.origin", level="warning", message_has="evil.example")
    one(records, logger="uvicorn.error", level="warning", message_has="Unsupported upgrade")
    one(
        records,
        logger="middleware.conversations.cleaning",
        level="info",
        message_has="leaving this openai body as it was",
    )
    # The plugin's traceback is a field of its record, never lines of its own.
    failed = one(records, logger="middleware.plugin.host", level="error", message_has="broken")
    assert "a broken plugin\nsays so on two lines" in failed["message"]
    assert failed["traceback"].startswith("Traceback (most recent call last):\n")
    assert failed["traceback"].endswith("RuntimeError: a broken plugin\nsays so on two lines")
    assert not any(line.startswith(("Traceback", "  File", "WARNING:", "INFO:")) for line in lines)


#: A line of the text format: when, the level, the logger, the message.
TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR) \S+: ")


@pytest.mark.slow
def test_with_text_the_lines_are_as_they_were(
    provider: tuple[Provider, str], tmp_path: Path, broken_plugin: dict[str, str]
) -> None:
    lines = driven(provider[1], tmp_path, broken_plugin, {})
    access = [json.loads(line) for line in lines if line.startswith('{"method"')]
    first = next(line for line in access if line["status"] == 200)
    assert list(first)[:4] == ["method", "path", "route", "status"]  # no field added
    assert "time" not in first and "level" not in first
    said = [line for line in lines if TEXT_LINE.match(line)]
    assert any(" INFO middleware.cli.serve: chatcli-mw proxy on " in line for line in said)
    assert any(" WARNING middleware.proxy.origin: refused GET /healthz" in line for line in said)
    # uvicorn's lines in the same shape as ours, not in its own ("WARNING:  ...").
    assert any(" WARNING uvicorn.error: Unsupported upgrade request." in line for line in said)
    # Every other line belongs to the plugin's record: its message's second line, then
    # its traceback.
    rest = [line for line in lines if not TEXT_LINE.match(line) and not line.startswith("{")]
    assert rest[0].startswith("says so on two lines")
    assert rest[1] == "Traceback (most recent call last):"
    assert rest[-1] == "says so on two lines"


POLICY = "version: 1\nproxy:\n  log:\n    format: json\n    level: {level}\n"


@pytest.mark.slow
def test_a_reload_changes_the_level_without_a_restart(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    _, upstream = provider
    log, policy = tmp_path / "serve.log", tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(level="warning"), encoding="utf-8")
    unread = "leaving this openai body as it was"

    def said() -> list[dict[str, Any]]:
        return objects(log.read_text("utf-8").splitlines())

    overrides = {"spill.root": str(tmp_path / "spill")}
    with serve_process(upstream, overrides, log=log, policy=str(policy)) as url:
        httpx.post(url + "/v1/chat/completions", json=UNREADABLE, headers=HEADERS, timeout=60)
        assert wait_for(lambda: len(said()) >= 1)  # its access line
        assert not [r for r in said() if r["level"] == "info" and unread in r["message"]]
        assert not [r for r in said() if r["logger"] == "middleware.cli.serve"]  # start-up
        policy.write_text(POLICY.format(level="info"), encoding="utf-8")
        assert wait_for(lambda: _generation(url) == 2, 30)
        httpx.post(url + "/v1/chat/completions", json=UNREADABLE, headers=HEADERS, timeout=60)
        assert wait_for(lambda: any(unread in r["message"] for r in said()))


def _generation(url: str) -> int:
    generation: int = httpx.get(url + "/healthz", timeout=30).json()["policies"]["default"][
        "generation"
    ]
    return generation


@pytest.mark.parametrize(
    ("arguments", "environment", "key"),
    [
        ([], {"CHATCLI_PROXY__LOG__FORMAT": "yaml"}, "CHATCLI_PROXY__LOG__FORMAT"),
        ([], {"CHATCLI_PROXY__LOG__LEVEL": "verbose"}, "CHATCLI_PROXY__LOG__LEVEL"),
        (["--log-format", "xml"], {}, "proxy.log.format"),
        (["--log-level", "trace"], {}, "proxy.log.level"),
    ],
)
def test_an_invalid_format_or_level_is_a_policy_error_naming_the_key(
    arguments: list[str], environment: dict[str, str], key: str
) -> None:
    script = Path(sys.executable).parent / "chatcli-mw"
    with socket.socket() as taken:  # never listened on: the policy is refused first
        taken.bind(("127.0.0.1", 0))
        port = str(taken.getsockname()[1])
        done = subprocess.run(
            [str(script), "serve", "--port", port, *arguments],
            capture_output=True,
            text=True,
            env={**os.environ, **environment},
            timeout=60,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("chatcli-mw: error: ") and key in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def test_with_json_an_error_that_stops_the_proxy_after_its_policy_is_read_is_a_record() -> None:
    script = Path(sys.executable).parent / "chatcli-mw"
    with socket.create_server(("127.0.0.1", 0)) as taken:  # listening: the port is in use
        port = str(taken.getsockname()[1])
        done = subprocess.run(
            [str(script), "serve", "--port", port, "--log-format", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    records = objects(done.stderr.splitlines())
    stopped = one(records, level="critical", message_has=f"cannot listen on 127.0.0.1 port {port}")
    assert stopped["logger"] == "middleware.cli.serve"
