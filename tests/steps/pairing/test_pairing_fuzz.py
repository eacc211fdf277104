"""Fuzzing at the wire level, in all three formats: random structure (well-formed or not),
depth, ids (empty, missing, duplicated, rejected by Anthropic), empty and blank tool names,
unicode, and every Responses item type. ``process()`` either raises ``HistoryError``
(``FormatError`` included) or returns a history that ``check_history`` finds valid, that a
second pass leaves alone, and that loses nothing: every tool call and result of the input
is in the output or reported as dropped with its content. The input is never mutated.

The property tests in ``test_pairing_properties.py`` inject known faults into valid
histories; these draw the histories themselves, malformed ones included.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import middleware
from middleware.formats import get_codec
from middleware.formats.structure import MAX_DEPTH
from middleware.plugin.host import PluginHost

FORMATS = ("anthropic", "openai", "responses")

IDS = st.one_of(
    st.sampled_from(["c1", "c2", "c3", "", "x", "wf:0", "call_1|fc_2", "toolu_01", "ü", " "]),
    st.none(),
    st.text(max_size=6),
)
NAMES = st.one_of(st.sampled_from(["bash", "read", "", "  ", "ünï", "web_fetch"]), st.none())
TEXT = st.text(max_size=12)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
NOT_JSON = st.sampled_from(
    [float("nan"), float("inf"), {1: "a"}, {"s": {1, 2}}, b"x", ("a",), "a\udc80"]
)


def nested(levels: int) -> Any:
    value: Any = "deep"
    for _ in range(levels):
        value = {"a": value}
    return value


@st.composite
def odd_values(draw: st.DrawFn, ok: bool) -> Any:
    """A value for an extra field: JSON, or (``ok`` false) sometimes too deep or not JSON."""
    kind = draw(st.sampled_from(["json"] * 3 + ([] if ok else ["deep", "not_json"])))
    if kind == "deep":
        return nested(draw(st.integers(MAX_DEPTH, MAX_DEPTH + 80)))
    if kind == "not_json":
        return draw(NOT_JSON)
    return draw(JSON)


def maybe(draw: st.DrawFn, item: dict[str, Any], key: str, value: Any) -> None:
    """Set ``item[key]`` unless the value is ``None`` (then the key is left out, or, now and
    then, set to null)."""
    if value is not None or draw(st.integers(0, 9)) == 0:
        item[key] = value


@st.composite
def extras(draw: st.DrawFn, item: dict[str, Any], ok: bool) -> dict[str, Any]:
    """``item`` with, now and then, unknown fields, a cache marker or a broken value."""
    if draw(st.integers(0, 5)) == 0:
        item["cache_control"] = {"type": "ephemeral"}
    if draw(st.integers(0, 7)) == 0:
        item["x_extra"] = draw(odd_values(ok))
    return item


def content(draw: st.DrawFn, text_type: str, ok: bool) -> Any:
    kind = draw(st.sampled_from(["str"] * 4 + ["parts", "parts"] + ([] if ok else ["bad"])))
    if kind == "str":
        return draw(TEXT)
    if kind == "bad":
        return draw(st.sampled_from([5, None, {"text": "x"}, ["plain"], 1.5]))
    parts = [{"type": text_type, "text": draw(TEXT)} for _ in range(draw(st.integers(0, 2)))]
    if draw(st.booleans()):
        parts.append({"type": "image", "source": {"type": "url", "url": "https://e.x/i.png"}})
    return parts


# -- Anthropic Messages --------------------------------------------------------------------


@st.composite
def anthropic_message(draw: st.DrawFn, ok: bool) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "assistant"] + ([] if ok else ["system", ["user"]])))
    if draw(st.integers(0, 6)) == 0:
        return {"role": role, "content": content(draw, "text", ok)}
    blocks: list[Any] = []
    for _ in range(draw(st.integers(0, 4))):
        tool = "tool_use" if role == "assistant" else "tool_result"
        kinds = ["text", "thinking", tool, tool, tool]
        kind = draw(st.sampled_from(kinds + ([] if ok else ["tool_use", "tool_result"])))
        if kind == "text":
            blocks.append({"type": "text", "text": draw(TEXT)})
        elif kind == "thinking":
            blocks.append({"type": "thinking", "thinking": draw(TEXT), "signature": "sig"})
        elif kind == "tool_use":
            use: dict[str, Any] = {"type": "tool_use"}
            maybe(draw, use, "id", draw(IDS))
            maybe(draw, use, "name", draw(NAMES))
            use["input"] = draw(odd_values(ok))
            blocks.append(draw(extras(use, ok)))
        else:
            result: dict[str, Any] = {"type": "tool_result"}
            maybe(draw, result, "tool_use_id", draw(IDS))
            result["content"] = content(draw, "text", ok)
            if draw(st.booleans()):
                result["is_error"] = draw(st.sampled_from([True, False] + ([] if ok else ["yes"])))
            blocks.append(draw(extras(result, ok)))
    return draw(extras({"role": role, "content": blocks}, ok))


# -- OpenAI Chat Completions ---------------------------------------------------------------


@st.composite
def openai_message(draw: st.DrawFn, ok: bool) -> dict[str, Any]:
    role = draw(
        st.sampled_from(["user", "assistant", "assistant", "tool", "tool", "system", "developer"])
    )
    if role == "assistant":
        message: dict[str, Any] = {"role": role, "content": draw(st.one_of(st.none(), TEXT))}
        calls = []
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["function", "function", "custom"]))
            body: dict[str, Any] = {}
            maybe(draw, body, "name", draw(NAMES))
            if kind == "function":
                body["arguments"] = draw(st.one_of(TEXT, st.just("{}"), odd_values(ok)))
            else:
                body["input"] = draw(TEXT)
            call: dict[str, Any] = {"type": kind, kind: body}
            maybe(draw, call, "id", draw(IDS))
            calls.append(call)
        if calls or draw(st.booleans()):
            message["tool_calls"] = calls
        return draw(extras(message, ok))
    if role == "tool":
        tool: dict[str, Any] = {"role": "tool", "content": content(draw, "text", ok)}
        maybe(draw, tool, "tool_call_id", draw(IDS))
        return draw(extras(tool, ok))
    return draw(extras({"role": role, "content": content(draw, "text", ok)}, ok))


# -- OpenAI Responses ----------------------------------------------------------------------

CALL_ITEMS: dict[str, tuple[str | None, str]] = {
    "function_call": ("name", "arguments"),
    "custom_tool_call": ("name", "input"),
    "local_shell_call": (None, "action"),
    "shell_call": (None, "action"),
    "apply_patch_call": (None, "operation"),
    "computer_call": (None, "action"),
    "tool_search_call": (None, "arguments"),
}
OUTPUT_ITEMS = (
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "shell_call_output",
    "apply_patch_call_output",
    "computer_call_output",
    "tool_search_output",
)
SERVER_ITEMS = [
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    {"type": "file_search_call", "id": "fs_1", "queries": [], "status": "completed"},
    {"type": "code_interpreter_call", "id": "ci_1", "code": "1", "outputs": []},
    {"type": "image_generation_call", "id": "ig_1", "result": None, "status": "completed"},
    {"type": "mcp_call", "id": "m_1", "name": "x", "arguments": "{}", "server_label": "s"},
    {"type": "mcp_list_tools", "id": "ml_1", "server_label": "s", "tools": []},
    {
        "type": "mcp_approval_request",
        "id": "ar_1",
        "name": "x",
        "arguments": "{}",
        "server_label": "s",
    },
    {"type": "program", "id": "pg_1", "call_id": "p1", "code": "x", "fingerprint": "f"},
    {"type": "program_output", "id": "po_1", "call_id": "p1", "result": "r", "status": "completed"},
    {"type": "compaction", "id": "cp_1", "encrypted_content": "e"},
]


@st.composite
def responses_item(draw: st.DrawFn, ok: bool) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(
            [
                "message",
                "message",
                "call",
                "call",
                "call",
                "output",
                "output",
                "output",
                "reasoning",
                "server",
                "unknown",
            ]
        )
    )
    if kind == "message":
        roles = ["user", "assistant", "system", "developer"] + ([] if ok else ["tool"])
        role = draw(st.sampled_from(roles))
        return draw(
            extras(
                {"type": "message", "role": role, "content": content(draw, "input_text", ok)}, ok
            )
        )
    if kind == "reasoning":
        return {"type": "reasoning", "id": f"rs_{draw(st.integers(0, 9))}", "summary": []}
    if kind == "server":
        item = dict(draw(st.sampled_from(SERVER_ITEMS)))
        if draw(st.booleans()):
            item["execution"] = "server"
        return item
    if kind == "unknown":
        return {"type": draw(st.sampled_from(["new_thing_call", "new_thing_output", "novel"]))}
    if kind == "call":
        call_type = draw(st.sampled_from(list(CALL_ITEMS)))
        name_key, arguments_key = CALL_ITEMS[call_type]
        item = {"type": call_type}
        maybe(draw, item, "call_id", draw(IDS))
        if name_key is not None:
            maybe(draw, item, name_key, draw(NAMES))
        item[arguments_key] = draw(odd_values(ok))
        if call_type == "tool_search_call":
            item["execution"] = draw(st.sampled_from(["client", "server"]))
        return draw(extras(item, ok))
    output_type = draw(st.sampled_from(OUTPUT_ITEMS))
    item = {"type": output_type}
    maybe(draw, item, "id" if output_type == "local_shell_call_output" else "call_id", draw(IDS))
    if output_type == "shell_call_output":
        outcome = {"type": "exit", "exit_code": 0}
        item["output"] = [{"stdout": draw(TEXT), "stderr": "", "outcome": outcome}]
    elif output_type == "computer_call_output":
        item["output"] = {"type": "computer_screenshot", "image_url": "https://e.x/s.png"}
    elif output_type == "tool_search_output":
        item.update(execution=draw(st.sampled_from(["client", "server"])), tools=[])
    elif output_type == "apply_patch_call_output":
        item["status"] = draw(st.sampled_from(["completed", "failed"]))
        maybe(draw, item, "output", draw(st.one_of(st.none(), TEXT)))
    else:
        item["output"] = content(draw, "input_text", ok)
    return draw(extras(item, ok))


STRATEGIES = {"anthropic": anthropic_message, "openai": openai_message, "responses": responses_item}


@st.composite
def histories(draw: st.DrawFn, fmt: str, min_size: int = 0, max_size: int = 8) -> list[Any]:
    """Up to ``max_size`` messages; one history in four may hold malformed ones."""
    ok = draw(st.integers(0, 3)) > 0
    return draw(st.lists(STRATEGIES[fmt](ok), min_size=min_size, max_size=max_size))


# -- the properties ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pipelines() -> Iterator[tuple[middleware.Pipeline, middleware.Pipeline]]:
    """The default pipeline, and one running the pairing step alone (whose output keeps
    every result's text, so losslessness can be checked on it)."""
    host = PluginHost.create(load_entrypoints=False, builtins=("middleware.steps.pairing",))
    with (
        middleware.Pipeline.from_policy(None) as full,
        middleware.Pipeline.from_policy(None, host=host) as pairing,
    ):
        yield full, pairing


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _tool_blocks(messages: list[Any], fmt: str) -> tuple[list[str], list[str]]:
    """The calls' arguments and the results' contents of a history, as the codec reads
    them (canonical JSON, so they compare with the report's)."""
    calls, results = [], []
    for node in get_codec(fmt).parse(messages).nodes:
        calls += [_canonical(c.arguments) for c in node.calls]
        results += [_canonical(_plain(r.content)) for r in node.results]
    return calls, results


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def check(
    pipelines: tuple[middleware.Pipeline, middleware.Pipeline], messages: list[Any], fmt: str
) -> None:
    full, pairing = pipelines
    snapshot = copy.deepcopy(messages)
    try:
        result = full.process(messages, format=fmt)
    except middleware.HistoryError:  # FormatError included
        with pytest.raises(middleware.HistoryError):
            pairing.process(messages, format=fmt)
        with pytest.raises(middleware.HistoryError):
            middleware.check_history(messages, fmt)
        return
    finally:
        assert messages == snapshot, "the input was mutated"
    assert not result.report.problems, result.report.problems
    out = result.messages
    assert middleware.check_history(out, fmt) == [], (messages, out)
    again = full.process(out, format=fmt)
    assert again.messages == out and not again.report.by_step("pairing"), "not idempotent"

    repaired = pairing.process(messages, format=fmt)
    actions = repaired.report.by_step("pairing")
    out_calls, out_results = _tool_blocks(repaired.messages, fmt)
    in_calls, in_results = _tool_blocks(messages, fmt)
    dropped_calls = [
        _canonical(a.detail["arguments"])
        for a in actions
        if a.kind in ("unnamed_call_dropped", "duplicate_call_dropped")
    ]
    dropped_results = [
        _canonical(a.detail["content"])
        for a in actions
        if a.kind in ("orphan_dropped", "duplicate_result_dropped")
    ]
    for arguments in in_calls:
        assert arguments in out_calls or arguments in dropped_calls, arguments
    for content_ in in_results:
        assert content_ in out_results or content_ in dropped_results, content_
    assert len(out_calls) + len(dropped_calls) == len(in_calls)


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=250, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_histories_are_refused_or_repaired(
    pipelines: tuple[middleware.Pipeline, middleware.Pipeline], fmt: str, data: st.DataObject
) -> None:
    messages = data.draw(histories(fmt), label="messages")
    check(pipelines, messages, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_histories_in_auto_mode(
    pipelines: tuple[middleware.Pipeline, middleware.Pipeline], fmt: str, data: st.DataObject
) -> None:
    """Detection first: a history either reads as some format or raises FormatError."""
    messages = data.draw(histories(fmt, min_size=1, max_size=6), label="messages")
    try:
        detected = middleware.detect_format(messages).format
    except middleware.HistoryError:
        with pytest.raises(middleware.HistoryError):
            pipelines[0].process(messages)
        return
    check(pipelines, messages, detected)
