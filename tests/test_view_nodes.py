"""What nodes, calls and results work out once and keep, and the copies made without the
constructor (every request rebinds every message parsed before to its own wire object, and
copies the actions of the request it continues): the same as the constructor's."""

from __future__ import annotations

from dataclasses import fields

import pytest
from hypothesis import given
from hypothesis import strategies as st

from middleware.report import Action
from middleware.view import Node, Opaque, ToolCall, ToolResult

PARTS = st.lists(
    st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=20)),
        st.just({"type": "image", "source": {}}),
    ),
    max_size=4,
).map(tuple)


def test_a_rebound_node_is_the_node_the_constructor_makes_for_that_message() -> None:
    call, result = ToolCall("a", "Read", {"path": "x"}), ToolResult("a", "out")
    node = Node("assistant", (call, result, Opaque({})), {"old": 1}, 3, True, (("k", 1),), 9)
    assert node.calls == (call,) and node.results == (result,)  # worked out before rebinding
    raw = {"new": 1}
    rebound = node.rebound(raw, 7, 12)
    made = Node("assistant", node.blocks, raw, 7, True, (("k", 1),), 12)
    assert all(getattr(rebound, f.name) == getattr(made, f.name) for f in fields(Node))
    assert rebound.raw is raw and rebound == made
    assert rebound.calls is node.calls and rebound.results is node.results
    assert node.raw == {"old": 1} and node.origin == 3  # the original is unchanged
    here = Node("user", (), {"here": 1}, 5, raw_chars=4)
    moved = node.in_place_of(here)
    assert (moved.raw, moved.origin, moved.raw_chars, moved.changed) == (here.raw, 5, 4, True)


@given(st.one_of(st.text(max_size=40), PARTS))
def test_a_results_chars_are_its_texts_length(content: str | tuple[dict[str, object], ...]) -> None:
    result = ToolResult("a", content)
    assert result.chars == len(result.text)
    assert result.chars == len(result.text)  # kept, and the same


def test_calls_with_the_same_arguments_have_the_same_canonical_arguments() -> None:
    wire = ToolCall("a", "Bash", '{"b": 1, "a": "é"}')
    parsed = ToolCall("b", "Bash", {"a": "é", "b": 1})
    assert wire.canonical_arguments == parsed.canonical_arguments == '{"a": "é", "b": 1}'
    assert ToolCall("c", "Bash", "{not json").canonical_arguments == "{not json"
    assert ToolCall("d", "Bash", {"b": 2}).canonical_arguments != parsed.canonical_arguments


def test_an_action_with_another_detail_is_the_action_the_constructor_makes() -> None:
    action = Action("microcompact", "summarized", "a", "Read", 4, 900, 120, {"age": 3})
    copy = action.with_detail({"age": 5})
    assert copy == Action("microcompact", "summarized", "a", "Read", 4, 900, 120, {"age": 5})
    assert action.detail == {"age": 3}  # the original keeps its own


def test_a_check_since_a_checkpoint_inspects_and_returns_only_what_a_step_put_in() -> None:
    from middleware.view import Conversation

    nodes = [Node("user", (), {"n": i}, i) for i in range(6)]
    conversation = Conversation("anthropic", list(nodes), [n.raw for n in nodes])
    before = conversation.checkpoint()
    assert conversation.check(since=before) == []
    edited = nodes[4].with_blocks((ToolResult("a", "out"),))
    conversation.replace_node(4, edited)
    assert conversation.check(since=before) == [(4, edited)]
    conversation.nodes[2] = "not a node"  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"conversation\.nodes\[2\] is a str"):
        conversation.check(since=before)
    conversation.nodes[2] = nodes[2]
    conversation.insert_node(0, edited)  # not aligned: known nodes are found by identity
    assert conversation.check(since=before) == [(0, edited), (5, edited)]
