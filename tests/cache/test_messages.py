"""Parsed messages reused across requests: only an exactly equal message is reused, and
each request still gets its own message objects back."""

from __future__ import annotations

import copy
import json
from typing import Any

import middleware
from middleware.cache import DerivedCache
from middleware.policy import load_policy

POLICY = load_policy(None, env={}, dotenv_path=False)


def call(call_id: str, tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "Bash", "input": tool_input}


def history(tool_input: Any = 1) -> list[dict[str, Any]]:
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}
    return [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": [call("t1", {"n": tool_input})]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": [call("t2", {})]},
    ]


def wire(result: middleware.ProcessResult) -> str:
    return json.dumps(result.output, ensure_ascii=False)


def test_a_repeated_history_is_parsed_once_and_gives_the_same_bytes(tmp_path: Any) -> None:
    with middleware.Pipeline(POLICY, session_id="memo") as pipe:
        first = pipe.process(history())
        hits = pipe.cache.stats().hits
        second = pipe.process(history())
        assert pipe.cache.stats().hits > hits
    with middleware.Pipeline(POLICY, session_id="memo", cache=DerivedCache(0)) as plain:
        expected = plain.process(history())
    assert wire(first) == wire(second) == wire(expected)


def test_untouched_messages_are_the_callers_own_objects_on_a_hit() -> None:
    with middleware.Pipeline(POLICY, session_id="memo") as pipe:
        pipe.process(history())
        again = history()
        result = pipe.process(again)
    # The unanswered call gets a result; every other message is the caller's object.
    assert result.changed
    for message in again[:3]:
        assert any(out is message for out in result.messages)


def test_values_equal_under_python_equality_are_not_mistaken_for_each_other() -> None:
    """1, 1.0 and True compare equal in Python but are different JSON."""
    with middleware.Pipeline(POLICY, session_id="memo") as pipe:
        outputs = [wire(pipe.process(history(value))) for value in (1, 1.0, True, 1)]
    assert outputs[0] == outputs[3]
    assert len({outputs[0], outputs[1], outputs[2]}) == 3
    assert '"n": 1.0' in outputs[1] and '"n": true' in outputs[2]


def test_key_order_is_part_of_a_message() -> None:
    reordered = history()
    reordered[1] = {"content": reordered[1]["content"], "role": "assistant"}
    with middleware.Pipeline(POLICY, session_id="memo") as pipe:
        pipe.process(history())
        result = pipe.process(reordered)
    with middleware.Pipeline(POLICY, session_id="memo", cache=DerivedCache(0)) as plain:
        assert wire(result) == wire(plain.process(copy.deepcopy(reordered)))


def test_a_message_the_caller_mutates_after_a_request_is_read_afresh() -> None:
    messages = history()
    with middleware.Pipeline(POLICY, session_id="memo") as pipe:
        pipe.process(messages)
        # The agent edits its history in place, then sends it again.
        messages[1]["content"][0]["input"] = {"n": 2, "edited": True}
        messages[2]["content"][0]["content"] = "b.py"
        result = pipe.process(messages)
    with middleware.Pipeline(POLICY, session_id="memo", cache=DerivedCache(0)) as plain:
        assert wire(result) == wire(plain.process(copy.deepcopy(messages)))
    assert '"edited": true' in wire(result) and "b.py" in wire(result)


def test_messages_over_the_size_limit_are_not_kept() -> None:
    messages = history()
    messages[0]["content"] = "x" * 5_000
    entries = []
    for limit in (1_000, 10_000):
        policy = load_policy(
            None, env={}, dotenv_path=False, overrides={"cache": {"max_message_bytes": limit}}
        )
        with middleware.Pipeline(policy, session_id="memo") as pipe:
            pipe.process(messages)
            entries.append(pipe.cache.stats().entries)
    assert entries[1] == entries[0] + 1


def test_a_malformed_message_is_refused_the_same_way_with_the_cache() -> None:
    bad = history()
    bad.append({"role": "user", "content": [{"type": "text", "text": float("nan")}]})
    messages = []
    for cache in (DerivedCache(0), DerivedCache(1 << 20)):
        with middleware.Pipeline(POLICY, session_id="memo", cache=cache) as pipe:
            pipe.process(history())
            try:
                pipe.process(bad)
            except middleware.HistoryError as exc:
                messages.append(str(exc))
    assert len(messages) == 2 and messages[0] == messages[1]


def test_an_unpicklable_value_takes_the_ordinary_path() -> None:
    class Weird(str):
        def __reduce__(self) -> Any:
            raise TypeError("no pickling")

    messages = history()
    messages[0]["content"] = Weird("list the files")
    with middleware.Pipeline(POLICY, session_id="memo") as pipe:
        result = pipe.process(messages)
    assert result.messages[0] is messages[0]
