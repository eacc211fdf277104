"""Every call/output item pair of the OpenAI Responses API is paired, repaired and checked
from one table (``middleware/formats/responses_items.py``); server-executed items are left
alone. Cases from Codex CLI's history normalisation (``normalize.rs``) included."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

import middleware
from middleware.formats.wire.responses_items import BLANK_SCREENSHOT

MISSING = (
    "[Tool result missing — the tool execution was interrupted or failed silently. "
    "Do NOT retry this tool call. Analyze what went wrong and try a different approach.]"
)
USER = {"type": "message", "role": "user", "content": "go"}

#: One call item of each client-executed kind, and a real output answering it.
CALLS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "function_call": (
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "file body"},
    ),
    "custom_tool_call": (
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply", "input": "*** patch"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "applied"},
    ),
    "local_shell_call": (
        {"type": "local_shell_call", "id": "lsh_1", "call_id": "c1", "status": "completed",
         "action": {"type": "exec", "command": ["ls"], "env": {}}},
        {"type": "local_shell_call_output", "id": "c1", "output": "a.py\n"},
    ),
    "shell_call": (
        {"type": "shell_call", "call_id": "c1", "action": {"commands": ["ls"]}},
        {"type": "shell_call_output", "call_id": "c1", "output": [
            {"stdout": "a.py\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
        ]},
    ),
    "apply_patch_call": (
        {"type": "apply_patch_call", "call_id": "c1", "status": "completed",
         "operation": {"type": "delete_file", "path": "old.txt"}},
        {"type": "apply_patch_call_output", "call_id": "c1", "status": "completed",
         "output": "Deleted old.txt"},
    ),
    "computer_call": (
        {"type": "computer_call", "id": "cu_1", "call_id": "c1", "status": "completed",
         "pending_safety_checks": [], "action": {"type": "screenshot"}},
        {"type": "computer_call_output", "call_id": "c1",
         "output": {"type": "computer_screenshot", "image_url": "https://example.com/s.png"}},
    ),
    "tool_search_call": (
        {"type": "tool_search_call", "call_id": "c1", "execution": "client",
         "arguments": {"query": "inventory"}},
        {"type": "tool_search_output", "call_id": "c1", "execution": "client",
         "status": "completed", "tools": []},
    ),
}  # fmt: skip

#: The item written for a missing output of each call kind.
SYNTHETIC: dict[str, dict[str, Any]] = {
    "function_call": {"type": "function_call_output", "call_id": "c1", "output": MISSING},
    "custom_tool_call": {"type": "custom_tool_call_output", "call_id": "c1", "output": MISSING},
    "local_shell_call": {"type": "local_shell_call_output", "id": "c1", "output": MISSING},
    "shell_call": {"type": "shell_call_output", "call_id": "c1", "output": [
        {"stdout": "", "stderr": MISSING, "outcome": {"type": "exit", "exit_code": 1}}
    ]},
    "apply_patch_call": {"type": "apply_patch_call_output", "call_id": "c1", "status": "failed",
                         "output": MISSING},
    "computer_call": {"type": "computer_call_output", "call_id": "c1",
                      "output": {"type": "computer_screenshot", "image_url": BLANK_SCREENSHOT}},
    "tool_search_call": {"type": "tool_search_output", "call_id": "c1", "execution": "client",
                         "status": "completed", "tools": []},
}  # fmt: skip

#: Items the server executes: no client output, never paired.
SERVER_ITEMS: list[dict[str, Any]] = [
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    {"type": "file_search_call", "id": "fs_1", "queries": ["q"], "status": "completed"},
    {
        "type": "code_interpreter_call",
        "id": "ci_1",
        "code": "1+1",
        "status": "completed",
        "container_id": "cn_1",
        "outputs": [],
    },
    {"type": "image_generation_call", "id": "ig_1", "result": None, "status": "completed"},
    {"type": "mcp_call", "id": "mcp_1", "name": "x", "arguments": "{}", "server_label": "s"},
    {"type": "mcp_list_tools", "id": "ml_1", "server_label": "s", "tools": []},
    {"type": "tool_search_call", "call_id": "ts_1", "execution": "server", "arguments": {}},
    {"type": "tool_search_output", "call_id": "ts_1", "execution": "server", "tools": []},
    {"type": "program", "id": "pg_1", "call_id": "p1", "code": "x", "fingerprint": "f"},
    {"type": "program_output", "id": "po_1", "call_id": "p1", "result": "r", "status": "completed"},
]


@pytest.fixture(scope="module")
def pipe() -> Iterator[middleware.Pipeline]:
    with middleware.Pipeline.from_policy(None) as pipeline:
        yield pipeline


def process(pipe: middleware.Pipeline, items: list[dict[str, Any]]) -> middleware.ProcessResult:
    before = copy.deepcopy(items)
    result = pipe.process(items, format="responses")
    assert items == before
    assert middleware.check_history(result.messages, "responses") == [], result.messages
    again = pipe.process(result.messages, format="responses")
    assert not again.changed and again.messages == result.messages
    return result


@pytest.mark.parametrize("kind", CALLS)
def test_a_call_and_its_output_are_valid_and_untouched(
    pipe: middleware.Pipeline, kind: str
) -> None:
    call, output = CALLS[kind]
    items = [USER, call, output, {"type": "message", "role": "assistant", "content": "ok"}]
    assert middleware.check_history(items, "responses") == []
    result = process(pipe, items)
    assert not result.changed and all(a is b for a, b in zip(result.messages, items, strict=True))


@pytest.mark.parametrize("kind", CALLS)
def test_a_call_without_output_gets_one_of_its_own_type(
    pipe: middleware.Pipeline, kind: str
) -> None:
    call, _ = CALLS[kind]
    items = [USER, call, {"type": "message", "role": "user", "content": "next"}]
    (violation,) = middleware.check_history(items, "responses")
    assert (violation.index, violation.code) == (1, "missing_result")
    assert violation.reason == f"No tool output found for {kind.replace('_', ' ')} c1."
    result = process(pipe, items)
    assert result.messages == [USER, call, SYNTHETIC[kind], items[2]]
    (action,) = result.report.by_step("pairing")
    assert (action.kind, action.tool_call_id) == ("synthetic_result", "c1")


@pytest.mark.parametrize("kind", CALLS)
def test_an_output_without_call_is_dropped_with_its_content(
    pipe: middleware.Pipeline, kind: str
) -> None:
    _, output = CALLS[kind]
    items = [USER, {"type": "message", "role": "assistant", "content": "hi"}, output, USER]
    (violation,) = middleware.check_history(items, "responses")
    assert (violation.index, violation.code) == (2, "orphan_result")
    result = process(pipe, items)
    assert result.messages == [items[0], items[1], items[3]]
    (action,) = result.report.by_step("pairing")
    assert action.kind == "orphan_dropped" and action.tool_call_id == "c1"
    text_key = "output" if kind not in ("shell_call", "computer_call", "tool_search_call") else None
    if text_key is not None and isinstance(output.get(text_key), str):
        assert action.detail["content"] == output[text_key]
    else:  # structured outputs are reported whole (their call id is tool_call_id)
        assert action.detail["content"] == [{k: v for k, v in output.items() if k != "call_id"}]


def test_codex_answers_a_local_shell_call_with_a_function_call_output(
    pipe: middleware.Pipeline,
) -> None:
    # Codex CLI (normalize.rs): LocalShellCall is answered by a FunctionCallOutput.
    call, _ = CALLS["local_shell_call"]
    output = {"type": "function_call_output", "call_id": "c1", "output": "a.py\n"}
    items = [USER, call, output]
    assert middleware.check_history(items, "responses") == []
    result = process(pipe, items)
    assert not result.changed


def test_an_output_of_the_wrong_type_answers_nothing(pipe: middleware.Pipeline) -> None:
    # As in Codex: a custom tool call's output is looked up among custom outputs only.
    call, _ = CALLS["custom_tool_call"]
    wrong = {"type": "function_call_output", "call_id": "c1", "output": "text"}
    items = [USER, call, wrong]
    codes = [(v.index, v.code) for v in middleware.check_history(items, "responses")]
    assert codes == [(1, "missing_result"), (2, "orphan_result")]
    result = process(pipe, items)
    assert result.messages == [USER, call, SYNTHETIC["custom_tool_call"]]
    kinds = sorted(a.kind for a in result.report.by_step("pairing"))
    assert kinds == ["orphan_dropped", "synthetic_result"]


def test_server_executed_items_are_left_alone(pipe: middleware.Pipeline) -> None:
    items = [USER, *SERVER_ITEMS, {"type": "message", "role": "assistant", "content": "done"}]
    assert middleware.check_history(items, "responses") == []
    result = process(pipe, items)
    assert not result.changed and all(a is b for a, b in zip(result.messages, items, strict=True))


APPROVAL = {"type": "mcp_approval_request", "id": "ar_1", "name": "x", "arguments": "{}",
            "server_label": "s"}  # fmt: skip


@pytest.mark.parametrize("between", [SERVER_ITEMS[5], SERVER_ITEMS[9], APPROVAL])
def test_model_items_between_calls_keep_one_turn(
    pipe: middleware.Pipeline, between: dict[str, Any]
) -> None:
    # A model item between two calls of one response must not split the turn: the outputs
    # after it answer both calls.
    first, first_out = CALLS["function_call"]
    second = {**first, "call_id": "c2"}
    items = [USER, first, between, second, first_out, {**first_out, "call_id": "c2"}]
    assert middleware.check_history(items, "responses") == []
    assert not process(pipe, items).changed


def test_a_local_shell_output_may_name_its_call_in_call_id(pipe: middleware.Pipeline) -> None:
    call, _ = CALLS["local_shell_call"]
    output = {"type": "local_shell_call_output", "call_id": "c1", "output": "ok"}
    items = [USER, call, output]
    assert middleware.check_history(items, "responses") == []
    assert not process(pipe, items).changed


def test_an_apply_patch_failure_counts_as_an_error_result() -> None:
    from middleware.formats import get_codec

    failed = {"type": "apply_patch_call_output", "call_id": "c1", "status": "failed", "output": "x"}
    (node,) = get_codec("responses").parse([failed]).nodes
    assert node.results[0].is_error and node.results[0].text == "x"


def test_structured_outputs_are_never_rewritten_by_the_budget(tmp_path: Any) -> None:
    # An empty shell output is not "empty text": the budget step must not put text into it.
    call, output = CALLS["shell_call"]
    empty = {**output, "output": []}
    items = [USER, call, empty, {"type": "message", "role": "assistant", "content": "ok"}]
    with middleware.Pipeline.from_policy(None) as pipeline:
        result = pipeline.process(items, format="responses")
    assert result.messages[2] is empty


def test_a_structured_output_paired_by_position_takes_the_generated_id(
    pipe: middleware.Pipeline,
) -> None:
    # Found by the fuzz tests: the view's content of a structured output held its call id,
    # so the same output read differently once its id was generated.
    from middleware.formats import get_codec

    call, output = CALLS["shell_call"]
    items = [USER, {**call, "call_id": ""}, {**output, "call_id": ""}]
    result = process(pipe, items)
    generated = result.messages[1]["call_id"]
    assert result.messages[2] == {**output, "call_id": generated}
    codec = get_codec("responses")
    before, after = (codec.parse(m).nodes[2].results[0] for m in (items, result.messages))
    assert before.content == after.content
    kinds = sorted(a.kind for a in result.report.by_step("pairing"))
    assert kinds == ["id_generated", "result_paired_by_position"]
