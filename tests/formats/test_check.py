"""check_history(): the providers' pairing rules (peer-systems.md B2-B4), from wire messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import middleware
from middleware import FormatError, HistoryError, Violation, check_history
from middleware.cli.app import main
from tests.pairing_builders import FORMATS, A, Msg, R, Res, U, build, calls, results

TOOL_USE_T1 = {"type": "tool_use", "id": "t1", "name": "x", "input": {}}


def codes(history: list[Msg], fmt: str) -> list[tuple[int, str]]:
    return [(v.index, v.code) for v in check_history(build(history, fmt), fmt)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_valid_histories_have_no_violations(fmt: str) -> None:
    history: list[Msg] = [
        U("go"), A("looking", calls("c1", "c2")), results(("c2", "b"), ("c1", "a")), A("done")
    ]  # fmt: skip
    assert check_history(build(history, fmt), fmt) == []
    assert check_history([], fmt) == []


def test_anthropic_rules_and_provider_texts() -> None:
    missing = check_history(build([A(None, calls("toolu_1")), U("hi")], "anthropic"))
    assert missing == [
        Violation(
            0,
            "missing_result",
            "messages.0: `tool_use` ids were found without `tool_result` blocks immediately "
            "after: toolu_1. Each `tool_use` block must have a corresponding `tool_result` "
            "block in the next message.",
        )
    ]
    orphan = check_history(build([results(("toolu_9", "x"))], "anthropic"))
    assert orphan[0].code == "orphan_result"
    assert orphan[0].reason.startswith(
        "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9."
    )
    twice: list[Msg] = [
        A(None, calls("t")), results(("t", "a")), A(None, calls("t")), results(("t", "b"))
    ]  # fmt: skip
    dup = build(twice, "anthropic")
    assert [(v.index, v.code, v.reason) for v in check_history(dup)] == [
        (2, "duplicate_id", "messages.2.content.0: `tool_use` ids must be unique")
    ]


def test_anthropic_result_must_be_in_the_very_next_message() -> None:
    history: list[Msg] = [A(None, calls("t1")), U("wait"), results(("t1", "a"))]
    assert codes(history, "anthropic") == [(0, "missing_result"), (2, "displaced_result")]
    # Two assistant messages in a row: the first one's results are not "immediately after".
    history = [A(None, calls("t1")), A("more"), results(("t1", "a"))]
    assert codes(history, "anthropic") == [(0, "missing_result"), (2, "displaced_result")]


def test_anthropic_results_first_duplicates_and_empty_ids() -> None:
    text_first: list[dict[str, Any]] = [
        {"role": "assistant", "content": [TOOL_USE_T1]},
        {"role": "user", "content": [
            {"type": "text", "text": "note"},
            {"type": "tool_result", "tool_use_id": "t1", "content": "r"},
        ]},
    ]  # fmt: skip
    assert [v.code for v in check_history(text_first)] == ["result_not_first"]
    twice = [A(None, calls("t1")), R((Res("t1", "a"), Res("t1", "b")))]
    assert codes(twice, "anthropic") == [(1, "duplicate_result")]
    empty = [A(None, calls("")), R((Res("", "a"),))]
    assert sorted(codes(empty, "anthropic")) == [(0, "empty_id"), (0, "missing_result"),
                                                (1, "empty_id")]  # fmt: skip
    same_message = [A(None, calls("t1", "t1")), results(("t1", "a"))]
    assert codes(same_message, "anthropic") == [(0, "duplicate_id")]


def test_openai_rules_and_provider_texts() -> None:
    (missing,) = check_history(build([A(None, calls("call_1", "call_2")), results(("call_1", "a"))],
                                "openai"))  # fmt: skip
    assert missing.index == 0 and missing.code == "missing_result"
    assert missing.reason == (
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        "call_2"
    )
    (orphan,) = check_history(build([U("hi"), results(("call_9", "x"))], "openai"))
    assert (orphan.index, orphan.code) == (1, "orphan_result")
    assert orphan.reason == (
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
        "message with 'tool_calls'."
    )
    history = [A(None, calls("call_1")), results(("call_1", "a"), ("call_7", "b"))]
    unknown = check_history(build(history, "openai"))
    assert [(v.index, v.code) for v in unknown] == [(2, "orphan_result")]
    assert unknown[0].reason == (
        "Invalid parameter: 'tool_call_id' of 'call_7' not found in 'tool_calls' of previous "
        "message."
    )


def test_openai_displaced_duplicates_and_empty_ids() -> None:
    history: list[Msg] = [A(None, calls("c1")), U("wait"), results(("c1", "a"))]
    assert codes(history, "openai") == [(0, "missing_result"), (2, "displaced_result")]
    assert codes([A(None, calls("c1", "c1")), results(("c1", "a"))], "openai") == [
        (0, "duplicate_id")
    ]
    assert codes([A(None, calls("c1")), results(("c1", "a"), ("c1", "b"))], "openai") == [
        (2, "duplicate_result")
    ]
    assert sorted(codes([A(None, calls(""))], "openai")) == [(0, "empty_id"), (0, "missing_result")]
    # Ids reused by a later turn are legal (Kimi's web_fetch:0).
    reuse: list[Msg] = [A(None, calls("w:0")), results(("w:0", "a")), A(None, calls("w:0")),
                        results(("w:0", "b"))]  # fmt: skip
    assert codes(reuse, "openai") == []


def test_responses_rules_and_provider_texts() -> None:
    (missing,) = check_history(build([A(None, calls("call_1")), U("next")], "responses"))
    assert (missing.index, missing.code) == (0, "missing_result")
    assert missing.reason == "No tool output found for function call call_1."
    (orphan,) = check_history(build([U("hi"), results(("call_9", "x"))], "responses"))
    assert (orphan.index, orphan.code) == (1, "orphan_result")
    assert orphan.reason == "No tool call found for function call output with call_id call_9."
    # Pairing is by call_id within the turn's block: a message in between is fine ...
    assert codes([A(None, calls("c1")), U("note"), results(("c1", "a"))], "responses") == []
    # ... but an output after the next model turn answers nothing of that turn.
    late: list[Msg] = [A(None, calls("c1")), U("x"), A("other"), results(("c1", "a"))]
    assert codes(late, "responses") == [(0, "missing_result"), (3, "displaced_result")]


def test_responses_duplicates_and_empty_ids() -> None:
    assert codes([A(None, calls("c1", "c1")), results(("c1", "a"))], "responses") == [
        (1, "duplicate_id")
    ]
    assert codes([A(None, calls("c1")), results(("c1", "a"), ("c1", "b"))], "responses") == [
        (2, "duplicate_result")
    ]
    assert codes([A(None, calls("")), results(("", "a"))], "responses") == [
        (0, "empty_id"), (1, "orphan_result")
    ]  # fmt: skip


def test_auto_detects_the_format_and_bad_input_is_refused() -> None:
    messages = build([A(None, calls("t1"))], "anthropic")
    assert [v.code for v in check_history(messages)] == ["missing_result"]
    with pytest.raises(HistoryError):
        check_history("not a list")  # type: ignore[arg-type]
    with pytest.raises(HistoryError):
        check_history([1, 2])
    with pytest.raises(FormatError):
        check_history(messages, "cohere")


def test_the_old_name_still_works_for_one_release() -> None:
    import middleware

    with pytest.warns(DeprecationWarning, match="renamed middleware.check_history"):
        old = middleware.validate
    assert old is check_history
    with pytest.raises(AttributeError):
        middleware.no_such_name  # noqa: B018


# -- structure: the same errors as process() -------------------------------------------------

NOT_CONVERSATIONS: list[tuple[str, Any]] = [
    ("foo", [{"foo": 2}]),
    ("int content", [{"role": "user", "content": 5}]),
    ("tau-bench task file", [{"task_id": 0, "reward": 1.0, "info": {}, "traj": [], "trial": 0}]),
    ("list role", [{"role": ["user"], "content": "x"}]),
    ("responses item", [{"type": "function_call", "call_id": "c", "name": "x", "arguments": 1.5j}]),
]


def _process_error(messages: Any, fmt: str) -> HistoryError:
    with middleware.Pipeline.from_policy(None) as pipe, pytest.raises(HistoryError) as info:
        pipe.process(messages, format=fmt)
    return info.value


@pytest.mark.parametrize("fmt", ["auto", *FORMATS])
@pytest.mark.parametrize(
    ("name", "messages"), NOT_CONVERSATIONS, ids=[n for n, _ in NOT_CONVERSATIONS]
)
def test_check_raises_what_process_raises(fmt: str, name: str, messages: Any) -> None:
    expected = _process_error(messages, fmt)
    with pytest.raises(HistoryError) as info:
        check_history(messages, fmt)
    assert type(info.value) is type(expected)
    assert (info.value.index, str(info.value)) == (expected.index, str(expected))


def test_check_raises_the_codecs_own_errors() -> None:
    messages = [{"role": "user", "content": [{"text": "x"}]}]
    with pytest.raises(HistoryError) as info:
        check_history(messages, "anthropic")
    assert str(info.value) == str(_process_error(messages, "anthropic"))
    assert "has no 'type'" in str(info.value)


def test_check_raises_the_format_error_of_a_mixed_history() -> None:
    mixed = [build([A(None, calls("t1"))], "anthropic")[0], {"role": "tool", "content": "x"}]
    with pytest.raises(FormatError) as info:
        check_history(mixed)
    assert str(info.value) == str(_process_error(mixed, "auto"))


def test_cli_check_refuses_what_is_not_a_conversation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, messages in NOT_CONVERSATIONS[:3]:
        path = tmp_path / "history.json"
        path.write_text(json.dumps(messages), encoding="utf-8")
        assert main(["check", str(path)]) == 2, name
        captured = capsys.readouterr()
        assert "paired correctly" not in captured.out
        assert captured.err.startswith(f"chatcli-mw: error: {path}: message 0: "), captured.err
