"""The recordings of what Claude Code, Codex CLI, opencode and Gemini CLI send when their
model reads a file (tests/recorded/*-read.json, made by tests/read_recording.py) hold what
they claim: the CLI's own read call and its result, the file's text in the CLI's own format
(line-number prefixes, wrappers, the notice of a partial read), the edit quoting a line of
it and the CLI's answer to the edit; the long file's read with the CLI's truncation notice;
the file given with the prompt. So the files cannot rot unseen.

With ``CHATCLI_RECORD=1`` the module first records them again with the installed CLIs
(tests/read_recording.py), then checks them.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from agent_events import Event
from agents import PINNED, missing
from read_recording import (
    EDITED,
    FILE_NAME,
    FREEFORM,
    HISTORY,
    LINES,
    LONG_LINES,
    PART,
    READERS,
    Reader,
    line,
    model_events,
    record,
    tool_name,
)

import middleware

IDS = [reader.slug for reader in READERS]
#: The model routes (Gemini's name the model in the path), the query left out.
MODEL_ROUTE = re.compile(r"^/v1/(messages|responses)$|:(stream)?[gG]enerateContent$")


@pytest.mark.skipif(os.environ.get("CHATCLI_RECORD") != "1", reason="CHATCLI_RECORD=1 records")
@pytest.mark.parametrize("reader", READERS, ids=IDS)
def test_record(reader: Reader) -> None:
    why = missing(reader.agent.cli)
    if why is not None:
        pytest.skip(why)
    record(reader)


def load(reader: Reader) -> dict[str, Any]:
    recording: dict[str, Any] = json.loads(reader.path.read_text("utf-8"))
    return recording


def model_bodies(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bodies of the requests to the model that declare tools (not a title request,
    not Claude Code's token count)."""
    return [
        r["body"]
        for r in requests
        if r["method"] == "POST"
        and isinstance(r["body"], dict)
        and MODEL_ROUTE.search(r["path"].split("?")[0])
        and r["body"].get("tools")
    ]


def shown(reader: Reader, first: int, last: int) -> str:
    """Lines ``first`` to ``last`` of the file as the CLI's read shows them."""
    return "\n".join(reader.shown(n, line(n).rstrip("\n")) for n in range(first, last + 1))


def declared(fmt: str, body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each tool the request declares, by name."""
    out: dict[str, dict[str, Any]] = {}
    for tool in body["tools"]:
        inside = (tool.get("functionDeclarations") or [tool]) if fmt == "gemini" else [tool]
        for declaration in inside:
            out[tool_name(declaration)] = declaration
    return out


def argument_schema(declaration: dict[str, Any]) -> dict[str, Any]:
    schema = (
        declaration.get("input_schema")
        or declaration.get("parameters")
        or declaration.get("parametersJsonSchema")
        or {}
    )
    properties: dict[str, Any] = schema.get("properties") or {}
    return properties


def calls_and_results(fmt: str, body: dict[str, Any]) -> tuple[list[Event], list[str]]:
    seen = model_events(fmt, body)
    return [e for e in seen if e.kind == "call"], [e.text for e in seen if e.kind == "result"]


@pytest.mark.parametrize("reader", READERS, ids=IDS)
def test_a_recording_holds_the_clis_read_its_result_and_the_edit(reader: Reader) -> None:
    recording = load(reader)
    fmt = reader.agent.fmt
    assert recording["agent"] == reader.title and recording["version"] == PINNED[reader.agent.cli]
    assert {"recorded", "how"} <= set(recording)
    assert recording["file"]["edited"] is True  # the CLI made the scripted edit
    path = Path(recording["file"]["path"])
    bodies = model_bodies(recording["requests"])
    calls, results = calls_and_results(fmt, bodies[-1])

    # The calls the scripted model made, as the CLI sent them back (a CLI may add an
    # argument's default, as Claude Code adds Edit's replace_all).
    meant = reader.calls(path)
    assert [c.name for c in calls] == [c.name for c in meant]
    for made, scripted in zip(calls, meant, strict=True):
        assert {k: made.arguments.get(k) for k in scripted.arguments} == scripted.arguments
    assert len(results) == len(meant)

    # The read of the whole file: every line, in the CLI's own format.
    assert shown(reader, 1, LINES) in results[0]
    # The second read: a part (Codex CLI's cat: the whole file again).
    if reader.slug == "codex":
        assert results[1].endswith(shown(reader, 1, LINES) + "\n")
    else:
        first, last = PART[0], PART[0] + PART[1] - 1
        assert shown(reader, first, last) in results[1]
        assert line(first - 1).rstrip("\n") not in results[1]
        assert line(last + 1).rstrip("\n") not in results[1]
    # The edit quotes a line of what was read, and the CLI says it was made.
    quoted = line(EDITED).rstrip("\n")
    assert reader.shown(EDITED, quoted) in results[0]
    assert any(quoted in str(value) for value in calls[2].arguments.values())
    assert reader.edit_said in results[2]

    # The read and edit tools are declared whole: the arguments the model gave are theirs,
    # each described.
    tools = declared(fmt, bodies[-1])
    for made in calls:
        declaration = tools[made.name]
        if set(made.arguments) == {FREEFORM}:  # a freeform tool: its grammar
            assert declaration["type"] == "custom" and "*** Begin Patch" in json.dumps(declaration)
            continue
        schema = argument_schema(declaration)
        assert set(made.arguments) <= set(schema)
        assert all(schema[name].get("description") for name in made.arguments)

    # Every request to the model is one the provider accepts (each call answered).
    for body in bodies:
        assert middleware.check_history(body[HISTORY[fmt]], fmt) == []


@pytest.mark.parametrize("reader", READERS, ids=IDS)
def test_the_long_files_read_carries_the_clis_truncation_notice(reader: Reader) -> None:
    long = load(reader)["long_file"]
    assert long["lines"] == LONG_LINES
    fmt = reader.agent.fmt
    calls, results = calls_and_results(fmt, model_bodies(long["requests"])[-1])
    assert [c.name for c in calls] == [c.name for c in reader.long_calls(Path(long["path"]))]
    [result] = results
    assert reader.long_notice in result
    assert shown(reader, 1, 5) in result  # the head, as the CLI shows it
    assert "lines of the file cut here for the test" in result  # and nothing whole but that
    assert shown(reader, LONG_LINES - 4, LONG_LINES) not in result or reader.slug == "codex"


@pytest.mark.parametrize(
    "reader", [r for r in READERS if r.attach], ids=[r.slug for r in READERS if r.attach]
)
def test_a_file_given_with_the_prompt_is_in_the_request_without_a_call(reader: Reader) -> None:
    attached = load(reader)["attached"]
    assert reader.attach is not None
    said = reader.attach[2]
    fmt = reader.agent.fmt
    bodies = model_bodies(attached["requests"])
    calls, results = calls_and_results(fmt, bodies[-1])
    assert not calls and not results  # read by the CLI, no call made by the model
    history = json.dumps(bodies[-1][HISTORY[fmt]], ensure_ascii=False)
    assert said in history and FILE_NAME in history
    texts = _strings(bodies[-1][HISTORY[fmt]])
    assert any(shown(reader, 1, LINES) in text for text in texts)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []
