"""What the console keeps: each request within ``proxy.console.request_bytes`` whatever it
holds, counted in the session pool's memory budget and given back first when the pool is
over it; the agent named from where the session key came, on the agents' recorded
requests."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from locations import REPO
from record_builders import records_in

from middleware import load_policy
from middleware.conversations.cleaning import Cleaned, clean_body
from middleware.conversations.keys import session_of
from middleware.conversations.sessions import SessionPool
from middleware.formats.routes import proxy_route
from middleware.plugin.host import PluginHost
from middleware.policy import Policy
from middleware.proxy.console.book import (
    MIN_REQUEST_BYTES,
    RECORD_OVERHEAD,
    ConsoleBook,
    Note,
    _in_order,
    agent_of,
)
from middleware.proxy.console.paging import Asked
from middleware.proxy.console.record import longest_run, with_texts

RECORDED = {
    "claude-code-2.1.197.json": "Claude Code",
    "codex-0.171.0.json": "Codex",
    "opencode-1.18.33.json": "opencode",
    "opencode-1.18.33-openai.json": "opencode",
    "gemini-cli-0.61.0.json": "Gemini CLI",
}


@pytest.mark.parametrize(("recording", "agent"), RECORDED.items())
def test_the_agent_is_named_from_its_session_key_on_its_recorded_requests(
    recording: str, agent: str
) -> None:
    for request in json.loads((REPO / "tests" / "recorded" / recording).read_text())["requests"]:
        route = proxy_route(request["method"], request["path"].split("?")[0])
        if route is None:
            continue
        headers = {k.lower(): v for k, v in request["headers"].items()}
        key = session_of(headers, request["body"], route.codec)
        assert agent_of(key.source, route.codec.name, headers.get("user-agent", "")) == agent


def test_an_sdk_naming_its_session_is_an_sdk() -> None:
    assert agent_of("x-chatcli-session", "anthropic", "python-httpx/0.28") == "SDK"
    assert agent_of("opening", "openai", "OpenAI/Python 1.99") == "SDK"


@pytest.fixture
def policy(tmp_path: Path) -> Policy:
    return load_policy(None, overrides={"spill.root": str(tmp_path)}, dotenv_path=False)


@pytest.fixture
def pool(policy: Policy) -> Iterator[SessionPool]:
    pool = SessionPool.for_policy(PluginHost.create(load_entrypoints=False), policy)
    yield pool
    pool.close()


def cleaned(pool: SessionPool, policy: Policy, session: str, outputs: list[str]) -> Cleaned:
    """A request of ``session`` whose calls returned ``outputs``, cleaned for real."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Go."}]
    for i, output in enumerate(outputs):
        call = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": "x"}}
        messages.append({"role": "assistant", "content": [call]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": output}
        messages.append({"role": "user", "content": [result]})
    body = json.dumps({"model": "m", "max_tokens": 1, "messages": messages}).encode()
    return clean_body(body, "anthropic", {"x-chatcli-session": session}, pool, ("p", policy))


def interrupted(pool: SessionPool, policy: Policy, session: str, calls: int) -> Cleaned:
    """A request of ``session`` whose last reply made ``calls`` calls that have no result
    (the agent was stopped): pairing inserts a result for each, ``calls`` new actions."""
    made = [{"type": "tool_use", "id": f"toolu_{i:05d}", "name": "Bash",
             "input": {"command": f"echo {i}"}} for i in range(calls)]  # fmt: skip
    messages = [{"role": "user", "content": "Go."}, {"role": "assistant", "content": made},
                {"role": "user", "content": "Go on."}]  # fmt: skip
    body = json.dumps({"model": "m", "max_tokens": 1, "messages": messages}).encode()
    return clean_body(body, "anthropic", {"x-chatcli-session": session}, pool, ("p", policy))


def fitted(
    record: dict[str, Any], steps: list[tuple[dict[str, Any], dict[str, str]]], room: int
) -> bytes:
    """``record`` with ``steps`` and their texts, fitted to ``room`` as the book does."""
    run, size = longest_run(record, (step for step, _ in steps), len(steps), room)
    return with_texts(run, [texts for _, texts in steps[: len(run["steps"])]], size, room)


def big(letter: str, lines: int = 600) -> str:
    return "".join(f"{letter} {i:05d} {'é' * 40} \ud83d\ude00\n" for i in range(lines))


def test_a_request_is_kept_within_its_bound_however_much_the_steps_did(
    pool: SessionPool, policy: Policy
) -> None:
    book = ConsoleBook(4096)
    request = cleaned(pool, policy, "s", [big(c) for c in "abcdef"])
    assert request.report is not None and len(request.report.by_step("budget")) == 6
    note = book.note(request, route="anthropic", user_agent="", now=1.0)
    assert note is not None and note.size <= 4096
    kept = json.loads(note.kept)
    shown = kept["steps"]
    assert len(shown) + kept["omitted"] == 6 and shown
    seen = [step for step in shown if "seen" in step]
    assert seen  # some of what the model saw instead, each cut to its share, saying so
    for step in seen:
        assert step["seen"].endswith("more characters]") and step["seen_chars"] > 2000
    # At the least bound a request may be given, the actions that do not fit are counted.
    smallest = ConsoleBook(MIN_REQUEST_BYTES).note(request, route="", user_agent="", now=1.0)
    assert smallest is not None and smallest.size <= MIN_REQUEST_BYTES
    assert json.loads(smallest.kept)["omitted"] > 0


@settings(max_examples=60)
@given(
    texts=st.lists(st.text(st.characters(codec=None, exclude_categories=())), max_size=6),
    room=st.integers(200, 6000),
)
def test_a_record_never_passes_its_room_and_stays_json(texts: list[str], room: int) -> None:
    steps = [({"step": "budget", "kind": "spilled", "call": f"c{i}"}, {"seen": t, "dropped": t})
             for i, t in enumerate(texts)]  # fmt: skip
    out = fitted({"n": 1}, steps, room)
    assert len(out) <= room or out == fitted({"n": 1}, [], room)
    record = json.loads(out)
    for step in record["steps"]:
        original = texts[int(step["call"][1:])]
        for key in ("seen", "dropped"):
            if key in step:
                whole = step[key] == original
                assert whole or original.startswith(step[key].rsplit("… [", 1)[0])
                assert step[f"{key}_chars"] == len(original)


def encoded_to_note(request: Cleaned, monkeypatch: pytest.MonkeyPatch) -> int:
    """Characters of JSON the book writes to keep ``request`` (every ``json`` encoding)."""
    written = [0]
    encode = json.JSONEncoder.encode

    def counted(self: json.JSONEncoder, value: Any) -> str:
        text = encode(self, value)
        written[0] += len(text)
        return text

    with monkeypatch.context() as patched:
        patched.setattr(json.JSONEncoder, "encode", counted)
        ConsoleBook(16384).note(request, route="anthropic", user_agent="", now=1.0)
    return written[0]


def test_keeping_a_request_is_linear_in_its_actions(
    pool: SessionPool, policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """8,000 interrupted calls took 59.9 s of CPU to keep (each action dropped from a record
    too big re-encoded the rest): the work grows with the actions, not their square."""
    work = {}
    for calls in (250, 1000):
        request = interrupted(pool, policy, f"s{calls}", calls)
        assert request.report is not None and len(request.report.by_step("pairing")) == calls
        work[calls] = encoded_to_note(request, monkeypatch)
    assert work[1000] <= 4 * work[250] + 64 * 1024, work


@settings(max_examples=80, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 400), max_size=40),
    room=st.integers(60, 8000),
    texts=st.booleans(),
)
def test_a_record_keeps_the_longest_run_of_actions_that_fits(
    sizes: list[int], room: int, texts: bool
) -> None:
    """What is kept is what dropping the last action until the record fits kept."""
    steps = [({"step": "pairing", "kind": "synthetic_result", "call": "c" * size},
              {"seen": "x" * size} if texts else {}) for size in sizes]  # fmt: skip
    kept = len(sizes)
    while kept and len(json.dumps({"n": 1, "steps": [s for s, _ in steps[:kept]],
                                   "omitted": len(sizes) - kept},
                                  separators=(",", ":"))) > room:  # fmt: skip
        kept -= 1
    record = json.loads(fitted({"n": 1}, steps, room))
    assert [s["call"] for s in record["steps"]] == [s["call"] for s, _ in steps[:kept]]
    assert record["omitted"] == len(sizes) - kept


def test_the_records_count_in_the_pool_budget_and_go_first(
    pool: SessionPool, policy: Policy
) -> None:
    book = ConsoleBook(16384)
    pool.shares = book
    for i in range(6):
        request = cleaned(pool, policy, f"s{i}", [big("a"), big("b")])
        book.note(request, route="anthropic", user_agent="", now=float(i))
    pipelines = pool.held_bytes - book.held_bytes
    assert pipelines > 0 and book.held_bytes > 4 * 16384 > 4 * RECORD_OVERHEAD
    # Room for the sessions' state and two requests' records: the oldest records go.
    pool.max_bytes = pipelines + 2 * 16384 + 6 * 2048
    pool.trim()
    assert pool.evictions == 0 and pool.held_bytes <= pool.max_bytes
    assert book.shed_records >= 3
    summaries = book.summaries()
    assert list(summaries) == [f"s{i}" for i in range(6)]  # every session is still listed
    found = book.requests("s5", Asked(10))
    assert found is not None and json.loads(found.records)  # the latest kept its record
    oldest = book.requests("s0", Asked(10))
    assert oldest is not None and oldest.summary["forgotten"] == 1
    assert json.loads(oldest.records) == []
    # Over it with every record gone: the sessions seen least recently go, then the
    # sessions' state is forgotten, as before.
    pool.max_bytes = pipelines // 2
    pool.trim()
    assert book.summaries() == {} and book.held_bytes == 0
    assert pool.evictions > 0 and pool.held_bytes <= pool.max_bytes


def test_the_bill_is_kept_with_its_request(pool: SessionPool, policy: Policy) -> None:
    from middleware.ledger import Ledger, LedgerSettings, Usage
    from middleware.policy.settings import bind

    book, ledger = ConsoleBook(16384), Ledger(records_in())
    request = cleaned(pool, policy, "s", [big("a")])
    note = book.note(request, route="anthropic", user_agent="", now=1.0)
    assert note is not None
    held = book.held_bytes
    entry = ledger.record("s", "anthropic", Usage(input=10, output=5), "claude-sonnet-4-5",
                          bind(policy, LedgerSettings))  # fmt: skip
    book.billed(note, entry)
    assert book.held_bytes == held + len(note.billed)
    (kept,) = json.loads(book.requests("s", Asked(10)).records)  # type: ignore[union-attr]
    assert kept["bill"]["billed"]["input"] == 10 and kept["bill"]["dollars"] > 0


def test_a_poll_since_a_version_gets_new_requests_and_bills_that_came_later(
    pool: SessionPool, policy: Policy
) -> None:
    from middleware.ledger import Ledger, LedgerSettings, Usage
    from middleware.policy.settings import bind

    book, ledger = ConsoleBook(16384), Ledger(records_in())
    notes = [book.note(interrupted(pool, policy, "s", n), route="anthropic", user_agent="",
                       now=float(n)) for n in range(1, 6)]  # fmt: skip
    first = book.requests("s", Asked(2))
    assert first is not None and [r["n"] for r in json.loads(first.records)] == [4, 5]
    assert first.older and not first.more and first.kept == 5
    assert book.requests("s", Asked(10, since=first.version)).records == b"[]"  # type: ignore[union-attr]
    # The answer to request 2 is billed after the page read it; then request 6 comes.
    entry = ledger.record("s", "anthropic", Usage(input=10, output=5), "claude-sonnet-4-5",
                          bind(policy, LedgerSettings))  # fmt: skip
    assert notes[1] is not None
    book.billed(notes[1], entry)
    book.note(interrupted(pool, policy, "s", 6), route="anthropic", user_agent="", now=6.0)
    changed = book.requests("s", Asked(10, since=first.version, costs=True))
    assert changed is not None
    records = json.loads(changed.records)
    assert [r["n"] for r in records] == [2, 6] and records[0]["bill"]["billed"]["input"] == 10
    assert changed.costs == [(2, entry.dollars, entry.dollars_without)]  # type: ignore[union-attr]
    assert book.requests("s", Asked(10, since=changed.version)).records == b"[]"  # type: ignore[union-attr]
    # More changes than a poll takes: the rest come at the next, none lost or repeated.
    for n in range(7, 12):
        book.note(interrupted(pool, policy, "s", n), route="anthropic", user_agent="", now=n)
    got, since = [], changed.version
    while True:
        part = book.requests("s", Asked(2, since=since))
        assert part is not None
        got += [r["n"] for r in json.loads(part.records)]
        since = part.version
        if not part.more:
            break
    assert got == list(range(7, 12))


def test_a_request_kept_after_a_later_one_takes_its_place_by_number() -> None:
    """Two requests of one session cleaned at once are numbered as they come and may be
    kept in the other order: the records stay in order, for the pages' cursors."""
    notes = deque([Note(1, b"{}"), Note(3, b"{}")])
    _in_order(notes, Note(2, b"{}"))
    _in_order(notes, Note(4, b"{}"))
    assert [note.number for note in notes] == [1, 2, 3, 4]
