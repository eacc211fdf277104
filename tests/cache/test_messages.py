"""Parsed messages reused across requests: only an exactly equal message is reused, and
each request still gets its own message objects back."""

from __future__ import annotations

import copy
import json
from typing import Any

import middleware
from middleware.cache import DerivedCache
from middleware.policy import load_policy
from tests.text_agent_builders import mini

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


def count_readings(monkeypatch: Any) -> list[int]:
    """One entry per message the codec reads as tool output, as it reads it."""
    from middleware.formats.base import Codec

    read: list[int] = []
    original = Codec._mark_text_protocol

    def counted(self: Codec, node: Any, message: Any, rule: Any, previous: Any) -> Any:
        read.append(1)
        return original(self, node, message, rule, previous)

    monkeypatch.setattr(Codec, "_mark_text_protocol", counted)
    return read


def test_a_text_agents_observations_are_read_as_tool_output_once(monkeypatch: Any) -> None:
    outputs = [f"line {i}\n" * 300 for i in range(8)]
    read = count_readings(monkeypatch)
    with middleware.Pipeline(POLICY, session_id="memo") as pipe:
        first = pipe.process(mini(outputs[:7]))
        once = len(read)
        second = pipe.process(mini(outputs))
        # Only the new observation, and the first user message (not tool output) of
        # neither request, are read again: 8 user messages were read the first time.
        assert once == 8 and len(read) - once == 1
    with middleware.Pipeline(POLICY, session_id="memo", cache=DerivedCache(0)) as plain:
        assert wire(first) == wire(plain.process(mini(outputs[:7])))
        assert wire(second) == wire(plain.process(mini(outputs)))
    assert second.report.text_protocol == first.report.text_protocol is not None


def test_an_observation_edited_after_a_request_is_read_afresh() -> None:
    messages = mini([f"line {i}\n" * 300 for i in range(6)])
    with middleware.Pipeline(POLICY, session_id="memo") as pipe:
        pipe.process(messages)
        messages[3]["content"] = messages[3]["content"].replace("line 0", "edited 0")
        result = pipe.process(messages)
    with middleware.Pipeline(POLICY, session_id="memo", cache=DerivedCache(0)) as plain:
        assert wire(result) == wire(plain.process(copy.deepcopy(messages)))


def test_the_rule_a_message_was_read_by_is_part_of_what_is_kept() -> None:
    """One cache, two policies: an observation read as tool output under one rule is read
    afresh under another that does not match it."""
    messages = mini([f"line {i}\n" * 300 for i in range(6)])
    shared = DerivedCache(1 << 26)
    outputs = {}
    for pattern in ("<returncode>", "^NEVER"):
        policy = load_policy(
            None,
            env={},
            dotenv_path=False,
            overrides={"text_protocol": {"enabled": True, "pattern": pattern}},
        )
        with middleware.Pipeline(policy, session_id="memo", cache=shared) as pipe:
            outputs[pattern] = pipe.process(copy.deepcopy(messages))
        with middleware.Pipeline(policy, session_id="memo", cache=DerivedCache(0)) as plain:
            assert wire(outputs[pattern]) == wire(plain.process(copy.deepcopy(messages)))
    assert outputs["<returncode>"].report.tool_results == 6
    assert outputs["^NEVER"].report.tool_results == 0


def test_what_a_message_keeps_in_the_cache_counts_the_texts_it_was_read_as() -> None:
    big = mini(["x" * 100_000])
    sizes = []
    for enabled in (False, True):
        policy = load_policy(
            None, env={}, dotenv_path=False, overrides={"text_protocol": {"enabled": enabled}}
        )
        with middleware.Pipeline(policy, session_id="memo") as pipe:
            pipe.process(big)
            sizes.append(pipe.cache.stats().bytes)
    # Read as tool output, the observation's entry holds a second copy of its text.
    assert sizes[1] - sizes[0] >= 100_000
