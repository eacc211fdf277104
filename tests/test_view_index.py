"""The index of a conversation's tail (``Conversation.index(start, first_turn)``) is the
whole index's part for those nodes, whenever the tail opens an assistant turn: what a
request that continues the previous one relies on (``middleware.session.resume``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from middleware.view import Conversation, Node, ToolCall, ToolResult

IDS = st.sampled_from(["a", "b", "c", ""])


@st.composite
def nodes(draw: st.DrawFn) -> list[Node]:
    """Assistant nodes with calls and user/tool nodes with results, the ids drawn from a
    few (duplicates, orphans and unanswered calls included), text-protocol results too."""
    out: list[Node] = []
    for _ in range(draw(st.integers(0, 14))):
        role = draw(st.sampled_from(["assistant", "user", "tool"]))
        blocks: list[ToolCall | ToolResult] = []
        for _ in range(draw(st.integers(0, 3))):
            if role == "assistant":
                blocks.append(ToolCall(draw(IDS), draw(st.sampled_from(["Bash", "Read"])), {}))
            else:
                protocol = draw(st.booleans()) and role == "user"
                call_id = "" if protocol else draw(IDS)
                blocks.append(ToolResult(call_id, "out", text_protocol=protocol))
        out.append(Node(role, tuple(blocks)))  # type: ignore[arg-type]
    return out


@given(nodes())
def test_the_tail_index_is_the_whole_index_from_there(history: list[Node]) -> None:
    conversation = Conversation("anthropic", history)
    whole = conversation.index()
    for start, node in enumerate(history):
        if node.role != "assistant" or (start and history[start - 1].role == "assistant"):
            continue  # only where an assistant turn opens
        turns_before = whole.node_turns[start - 1] + 1 if start else 0
        tail = conversation.index(start, turns_before)
        assert tail.turn_count == whole.turn_count
        assert tail.node_turns == whole.node_turns[start:]
        assert tail.calls == tuple(c for c in whole.calls if c.node >= start)
        assert tail.results == tuple(r for r in whole.results if r.node >= start)
