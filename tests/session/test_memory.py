"""What a pipeline keeps between requests is counted, holds none of the request it came
from, and can be forgotten: the next request then comes out as a restarted process makes
it (issue 26, item 3; issue 27, item 4)."""

from __future__ import annotations

import gc
import json
import pickle
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import middleware
from middleware.cache import DerivedCache
from middleware.session.decisions import DECISION_BYTES, DecisionLedger
from middleware.session.previous import Previous
from middleware.session.remembered import Hollow, Stripped, held_bytes
from middleware.session.resume import MAX_CONVERSATIONS, Continuations

#: A schedule that moves within a short session, so compaction carries its state.
BUSY = {
    "microcompact": {
        "schedule": {"trigger_tokens": 2_000, "step_turns": 2, "min_reclaim_tokens": 200}
    }
}


def request(turns: int, name: str = "s", spilled: int = 9_000) -> list[dict[str, Any]]:
    """Anthropic: a task, then ``turns`` turns of one Bash call and its result, every third
    over the result cap (``spilled`` characters, spilled); ``name`` makes the texts the
    conversation's own."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Task of {name}."}]
    for i in range(turns):
        lines = spilled // 45 if i % 3 == 0 else 2_500 // 45
        output = "\n".join(f"{name}: case {n} of step {i} passed, all well" for n in range(lines))
        call = {
            "type": "tool_use",
            "id": f"toolu_{name}_{i:04}",
            "name": "Bash",
            "input": {"command": f"pytest -k mod{i}"},
        }
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "On."}, call]})
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": output}],
            }
        )
    return messages


def policy(root: Path, **overrides: Any) -> middleware.Policy:
    merged = {**BUSY, **overrides, "spill": {"root": str(root), "keep": True}}
    return middleware.load_policy(None, env={}, dotenv_path=False, overrides=merged)


def remembered(pipe: middleware.Pipeline) -> list[Previous]:
    return [previous for previous, _ in pipe.state.continuations._by_opening.values()]


def walked(roots: list[Any]) -> Iterator[Any]:
    """Every object reachable from ``roots``, once (classes aside)."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, type):
            continue
        seen.add(id(item))
        yield item
        stack.extend(gc.get_referents(item))


def reachable(roots: list[Any]) -> set[int]:
    """The ids of every object reachable from ``roots``."""
    return {id(item) for item in walked(roots)}


def strings(roots: list[Any]) -> list[str]:
    """Every string reachable from ``roots``."""
    return [item for item in walked(roots) if isinstance(item, str)]


def deep_size(roots: list[Any]) -> int:
    """Bytes of every object reachable from ``roots``."""
    return sum(map(sys.getsizeof, walked(roots)))


def test_what_a_request_leaves_holds_none_of_its_wire_messages(tmp_path: Path) -> None:
    """A remembered node stands for a message the next request carries again; keeping the
    request's own dicts would keep the whole parsed request alive (about twice its JSON)."""
    messages = request(8)
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        pipe.process(messages, format="anthropic")
        (previous,) = remembered(pipe)
        assert all(node.raw is None for node in previous.nodes)
        carried = previous.carried["microcompact"]
        assert carried.before and all(node.raw is None for node in carried.before)
        wire = {id(message) for message in messages}
        wire |= {id(block) for message in messages[1:] for block in message["content"]}
        assert not wire & reachable([previous])
        # and the next request still continues, with the same output as one in full
        continued = pipe.process(request(9), format="anthropic")
        assert continued.continued
    with middleware.Pipeline(policy(tmp_path), session_id="s", cache=DerivedCache(0)) as full:
        assert full.process(request(9), format="anthropic").output == continued.output


def test_a_remembered_request_keeps_none_of_what_the_next_one_carries_again(
    tmp_path: Path,
) -> None:
    """The next request of the conversation sends every message again: the session keeps
    a message's mark and role where the steps left it as it came, and only what the steps
    made where they changed it (issue 27: 200 conversations under the memory budget). The
    full outputs it spilled, which the budget step hands on and whose wire blocks they
    are, are taken from the next request."""
    messages = request(9, spilled=40_000)
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        first = pipe.process(messages, format="anthropic")
        assert any(a.kind == "spilled" for a in first.report.actions)
        (previous,) = remembered(pipe)
        assert len(previous.marks) == len(previous.nodes) == len(messages)
        hollow = [isinstance(node, Hollow) for node in previous.nodes]
        assert hollow.count(True) >= len(messages) // 2
        assert any(isinstance(node, Stripped) for node in previous.nodes)
        outputs = {m["content"][0]["content"] for m in messages[2::2]}
        kept = strings([previous])
        assert not outputs & set(kept)  # no full output, by identity or by value
        assert max(map(len, kept)) < max(map(len, outputs)) / 2  # previews, not outputs
        # what it holds is a fraction of the request, and the estimate is near the truth
        # (the policy it was read with is the pipeline's, not its own)
        size = deep_size([previous.marks, previous.nodes, previous.actions, previous.carried])
        assert 3 * size < len(json.dumps(messages))
        assert size / 2 <= held_bytes(previous) <= size * 2
        # the next request takes the rest from its own messages, and comes out the same
        continued = pipe.process(request(10, spilled=40_000), format="anthropic")
        assert continued.continued
    with middleware.Pipeline(policy(tmp_path), session_id="s", cache=DerivedCache(0)) as full:
        expected = full.process(request(10, spilled=40_000), format="anthropic").output
    assert expected == continued.output


def test_a_message_that_came_back_changed_is_never_taken_for_the_remembered_one(
    tmp_path: Path,
) -> None:
    """A hollow message stands for the one the next request carries at its place only
    while the marks agree: an edited old output ends the shared turns there."""
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        pipe.process(request(9), format="anthropic")
        edited = request(10)
        edited[4]["content"][0]["content"] += "\nedited later"  # an old result, changed
        out = pipe.process(edited, format="anthropic")
        assert out.continued  # from the turns before it
    with middleware.Pipeline(policy(tmp_path), session_id="s", cache=DerivedCache(0)) as full:
        assert full.process(edited, format="anthropic").output == out.output


def test_a_request_that_continued_reuses_the_nodes_remembered_before(tmp_path: Path) -> None:
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        pipe.process(request(8), format="anthropic")
        (first,) = remembered(pipe)
        pipe.process(request(9), format="anthropic")
        (second,) = remembered(pipe)
    assert len(second.nodes) == len(first.nodes) + 2
    # the turns that did not change are the same objects: one new node per new message
    # (the previous request's last turn, whose marker and compaction may move, aside)
    same = sum(a is b for a, b in zip(first.nodes, second.nodes, strict=False))
    assert same >= len(first.nodes) - 2


def test_the_bytes_held_are_those_of_the_conversations_remembered(tmp_path: Path) -> None:
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        assert pipe.held_bytes == 0
        pipe.process(request(8), format="anthropic")
        (previous,) = remembered(pipe)
        assert pipe.held_bytes == held_bytes(previous) > 0
        pipe.process(request(9), format="anthropic")  # the same conversation: replaced
        (previous,) = remembered(pipe)
        assert pipe.held_bytes == held_bytes(previous)
        pipe.process(request(5, "other"), format="anthropic")  # another: added
        assert pipe.held_bytes == sum(map(held_bytes, remembered(pipe)))
        pipe.forget()
        assert pipe.held_bytes == 0 and remembered(pipe) == []


def test_conversations_past_the_last_few_are_uncounted_as_they_go() -> None:
    continuations = Continuations()
    sizes = []
    for n in range(MAX_CONVERSATIONS + 3):
        previous = Previous((None, "anthropic", None), (n,), (_node(),), {}, {}, 0)  # type: ignore[arg-type]
        continuations.remember(previous)
        sizes.append(held_bytes(previous))
    assert continuations.bytes == sum(sizes[-MAX_CONVERSATIONS:])
    assert len(continuations.clear()) == MAX_CONVERSATIONS
    assert continuations.bytes == 0


def _node() -> Any:
    from middleware.view import Node

    return Node("user", (), raw={"role": "user", "content": "hi"}, origin=0)


def test_a_forgotten_session_comes_out_as_one_that_remembered(tmp_path: Path) -> None:
    requests = [request(n) for n in range(3, 15)]
    with middleware.Pipeline(policy(tmp_path), session_id="s") as kept:
        expected = [json.dumps(kept.process(r, format="anthropic").output) for r in requests]
        assert kept.continued == len(requests) - 1
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        seen = []
        for r in requests:
            seen.append(json.dumps(pipe.process(r, format="anthropic").output))
            pipe.forget()
        assert pipe.continued == 0
    assert seen == expected


def test_forgetting_lets_the_remembered_state_be_collected(tmp_path: Path) -> None:
    with middleware.Pipeline(policy(tmp_path), session_id="s") as pipe:
        pipe.process(request(8), format="anthropic")
        (previous,) = remembered(pipe)
        refs = [weakref.ref(previous), weakref.ref(previous.nodes[-1])]
        del previous
        pipe.forget()
        gc.collect()
        assert [ref() for ref in refs] == [None, None]


def test_ending_a_session_drops_what_the_cache_keeps_of_its_messages(tmp_path: Path) -> None:
    cache = DerivedCache(64 << 20)
    with (
        middleware.Pipeline(policy(tmp_path), session_id="s", cache=cache) as ended,
        middleware.Pipeline(policy(tmp_path), session_id="t", cache=cache) as other,
    ):
        ended.process(request(8, "s"), format="anthropic")
        other.process(request(8, "t"), format="anthropic")
        mine, theirs = (
            [pickle.dumps(message, 5) for message in request(8, name)] for name in "st"
        )  # what the message cache knows them by
        assert all(("message", key) in cache for key in mine + theirs)
        before = cache.stats().bytes
        ended.forget(cached=True)
        assert not any(("message", key) in cache for key in mine)
        assert all(("message", key) in cache for key in theirs)
        # the derived data of its results (digests, previews, summaries) went too
        texts = {m["content"][0]["content"] for m in request(8, "s")[2::2]}
        assert not any(text in texts for _, _, held in cache._entries.values() for text in held)
        assert cache.stats().bytes < before / 2 + 1
        # the other session is served from the cache as before
        assert other.process(request(9, "t"), format="anthropic").continued


def test_a_ledger_counts_its_decisions_and_forgets_them() -> None:
    ledger = DecisionLedger()
    ledger.record("a", "x" * 10_000, "preview", "request")
    ledger.record("b", "kept whole", "kept whole", "request")
    ledger.record("a", "x" * 10_000, "another", "request")  # the first decision wins
    assert ledger.bytes == 2 * DECISION_BYTES + len("a") + len("preview") + len("b")
    restored = DecisionLedger(ledger.export())
    assert restored.bytes == ledger.bytes
    ledger.clear()
    assert ledger.bytes == 0 and len(ledger) == 0
    assert ledger.lookup("a", "x" * 10_000) is None
