"""What the console records: each request within ``proxy.console.request_bytes`` whatever
it holds, put in the records database with its session's counts, its bill the ledger's
answer that names it; a page of a session's requests and a poll of what changed, read
back from the database; what the book remembers of each session counted in the session
pool's memory budget and given back first when the pool is over it; the agent named from
where the session key came, on the agents' recorded requests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st
from locations import REPO
from record_builders import records_in
from waiting import wait_for

from middleware import load_policy
from middleware.conversations.cleaning import Cleaned, clean_body
from middleware.conversations.keys import session_of
from middleware.conversations.sessions import SessionPool
from middleware.formats import get_codec
from middleware.formats.routes import proxy_route
from middleware.ledger import Caller, Ledger, LedgerSettings, Usage
from middleware.plugin.host import PluginHost
from middleware.policy import Policy
from middleware.policy.settings import bind
from middleware.proxy.console.book import (
    MIN_REQUEST_BYTES,
    RECORD_OVERHEAD,
    ConsoleBook,
    agent_of,
)
from middleware.proxy.console.paging import Asked, session_page
from middleware.proxy.console.record import longest_run, with_texts
from middleware.records import Records, RecordSettings, queries
from middleware.records.tables import REQUESTS

#: The codec the proxy carries for an Anthropic route.
ANTHROPIC = get_codec("anthropic")
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
    return clean_body(body, ANTHROPIC, {"x-chatcli-session": session}, pool, ("p", policy))


def interrupted(pool: SessionPool, policy: Policy, session: str, calls: int) -> Cleaned:
    """A request of ``session`` whose last reply made ``calls`` calls that have no result
    (the agent was stopped): pairing inserts a result for each, ``calls`` new actions."""
    made = [{"type": "tool_use", "id": f"toolu_{i:05d}", "name": "Bash",
             "input": {"command": f"echo {i}"}} for i in range(calls)]  # fmt: skip
    messages = [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": made},
        {"role": "user", "content": "Go on."},
    ]
    body = json.dumps({"model": "m", "max_tokens": 1, "messages": messages}).encode()
    return clean_body(body, ANTHROPIC, {"x-chatcli-session": session}, pool, ("p", policy))


def fitted(
    record: dict[str, Any], steps: list[tuple[dict[str, Any], dict[str, str]]], room: int
) -> bytes:
    """``record`` with ``steps`` and their texts, fitted to ``room`` as the book does."""
    run, size = longest_run(record, (step for step, _ in steps), len(steps), room)
    return with_texts(run, [texts for _, texts in steps[: len(run["steps"])]], size, room)


def big(letter: str, lines: int = 600) -> str:
    return "".join(f"{letter} {i:05d} {'é' * 40} \ud83d\ude00\n" for i in range(lines))


@pytest.fixture
def records() -> Iterator[Records]:
    opened = records_in()
    yield opened
    opened.close()


def kept_of(records: Records, session: str) -> bytes:
    """The record the database keeps of the session's latest request."""
    (row,) = queries.requests(records.store(), session, limit=1)
    return bytes(row["record"])


def page(records: Records, session: str, asked: Asked) -> Any:
    found = session_page(records.store(), session, asked, "e")
    assert found is not None
    return json.loads(found)


def test_a_request_is_kept_within_its_bound_however_much_the_steps_did(
    pool: SessionPool, policy: Policy, records: Records
) -> None:
    book = ConsoleBook(records, 4096)
    request = cleaned(pool, policy, "s", [big(c) for c in "abcdef"])
    assert request.report is not None and len(request.report.by_step("budget")) == 6
    assert book.note(request, route="anthropic", user_agent="", now=1.0) is not None
    record = kept_of(records, "s")
    assert len(record) + RECORD_OVERHEAD <= 4096
    kept = json.loads(record)
    shown = kept["steps"]
    assert len(shown) + kept["omitted"] == 6 and shown
    seen = [step for step in shown if "seen" in step]
    assert seen  # some of what the model saw instead, each cut to its share, saying so
    for step in seen:
        assert step["seen"].endswith("more characters]") and step["seen_chars"] > 2000
    # At the least bound a request may be given, the actions that do not fit are counted.
    smallest = ConsoleBook(records, MIN_REQUEST_BYTES)
    assert smallest.note(request, route="", user_agent="", now=2.0) is not None
    record = kept_of(records, "s")
    assert len(record) + RECORD_OVERHEAD <= MIN_REQUEST_BYTES
    assert json.loads(record)["omitted"] > 0


@settings(max_examples=60)
@given(
    texts=st.lists(st.text(st.characters(codec=None, exclude_categories=())), max_size=6),
    room=st.integers(200, 6000),
)
def test_a_record_never_passes_its_room_and_stays_json(texts: list[str], room: int) -> None:
    steps = [
        ({"step": "budget", "kind": "spilled", "call": f"c{i}"}, {"seen": t, "dropped": t})
        for i, t in enumerate(texts)
    ]
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
        ConsoleBook(Records.in_memory(), 16384).note(
            request, route="anthropic", user_agent="", now=1.0
        )
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
    while (
        kept
        and len(
            json.dumps(
                {"n": 1, "steps": [s for s, _ in steps[:kept]], "omitted": len(sizes) - kept},
                separators=(",", ":"),
            )
        )
        > room
    ):
        kept -= 1
    record = json.loads(fitted({"n": 1}, steps, room))
    assert [s["call"] for s in record["steps"]] == [s["call"] for s, _ in steps[:kept]]
    assert record["omitted"] == len(sizes) - kept


def test_what_the_book_remembers_counts_in_the_pool_budget_and_goes_first(
    pool: SessionPool, policy: Policy, records: Records
) -> None:
    """The records are the database's; what the book holds is, for each session, the
    actions it has shown (to count those a later request repeats): in the pool's budget,
    forgotten before any session's state is."""
    book = ConsoleBook(records, 16384)
    pool.shares = book
    for i in range(6):
        request = cleaned(pool, policy, f"s{i}", [big("a"), big("b")])
        book.note(request, route="anthropic", user_agent="", now=float(i))
    pipelines = pool.held_bytes - book.held_bytes
    assert pipelines > 0 and book.held_bytes > 0
    # Room for the sessions' state and half of what the book holds: the sessions seen
    # least recently are forgotten by the book, none by the pool.
    pool.max_bytes = pipelines + book.held_bytes // 2
    pool.trim()
    assert pool.evictions == 0 and pool.held_bytes <= pool.max_bytes
    assert 1 <= book.forgotten < 6
    # A session the book forgot shows its actions again; every record stays.
    again = cleaned(pool, policy, "s0", [big("a"), big("b")])
    book.note(again, route="anthropic", user_agent="", now=7.0)
    assert len(json.loads(kept_of(records, "s0"))["steps"]) == 2
    assert all(queries.session(records.store(), f"s{i}")["requests"] >= 1 for i in range(6))  # type: ignore[index]
    # Over it with nothing left to forget: sessions forget their state, as before.
    pool.max_bytes = pipelines // 2
    pool.trim()
    assert book.held_bytes == 0 and pool.evictions > 0 and pool.held_bytes <= pool.max_bytes


def test_the_answer_that_names_a_request_is_its_bill(
    pool: SessionPool, policy: Policy, records: Records
) -> None:
    book, ledger = ConsoleBook(records, 16384), Ledger(records)
    note = book.note(
        cleaned(pool, policy, "s", [big("a")]), route="anthropic", user_agent="", now=1.0
    )
    assert note is not None
    entry = ledger.record(
        "s",
        "anthropic",
        Usage(input=10, output=5),
        "claude-sonnet-4-5",
        bind(policy, LedgerSettings),
        who=Caller(request=note.key),
    )
    assert entry is not None
    (shown,) = page(records, "s", Asked(10))["requests"]
    assert shown["bill"]["billed"]["input"] == 10 and shown["bill"]["dollars"] == entry.dollars
    assert (shown["n"], shown["replica"]) == (1, records.replica)


def test_a_poll_gets_the_new_requests_and_the_bills_that_came_later(
    pool: SessionPool, policy: Policy, records: Records
) -> None:
    book, ledger = ConsoleBook(records, 16384), Ledger(records)
    settings = bind(policy, LedgerSettings)

    def request(n: int, billed: bool = True) -> str:
        note = book.note(
            interrupted(pool, policy, "s", n), route="anthropic", user_agent="", now=float(n)
        )
        assert note is not None
        if billed:
            ledger.record(
                "s",
                "anthropic",
                Usage(input=n, output=1),
                "claude-sonnet-4-5",
                settings,
                who=Caller(request=note.key),
                now=float(n),
            )
        return note.key

    late = [request(n, billed=n != 2) for n in range(1, 6)][1]
    first = page(records, "s", Asked(2))
    assert [r["n"] for r in first["requests"]] == [4, 5]
    assert first["older"] and not first["more"] and first["kept"] == 5
    older = page(records, "s", Asked(10, before=first["requests"][0]["seq"]))
    assert [(r["n"], r["bill"] is None) for r in older["requests"]] == [
        (1, False),
        (2, True),
        (3, False),
    ]
    unbilled = (older["requests"][1]["seq"],)
    newest = first["last"]
    quiet = page(records, "s", Asked(10, after=newest, bills=unbilled))
    assert quiet["requests"] == [] and quiet["bills"] == {} and "costs" not in quiet
    # The answer to request 2 is billed after the page drew it; then request 6 comes.
    ledger.record(
        "s",
        "anthropic",
        Usage(input=200, output=1),
        "claude-sonnet-4-5",
        settings,
        who=Caller(request=late),
        now=6.5,
    )
    request(6)
    changed = page(records, "s", Asked(10, after=newest, bills=unbilled))
    assert [r["n"] for r in changed["requests"]] == [6]
    assert changed["bills"][str(unbilled[0])]["billed"]["input"] == 200
    assert changed["costs"][-1][0] == 6 and changed["row"]["requests"] == 6
    # More new requests than a poll takes: the rest at the next, none lost or repeated.
    for n in range(7, 12):
        request(n)
    got, after = [], changed["last"]
    while True:
        part = page(records, "s", Asked(2, after=after))
        got += [r["n"] for r in part["requests"]]
        after = part["requests"][-1]["seq"]
        if not part["more"]:
            break
    assert got == list(range(7, 12))


def test_records_in_memory_stay_within_their_bound_as_they_come(
    pool: SessionPool, policy: Policy
) -> None:
    """With ``ledger.url: null`` the records are in this process's memory: past
    ``ledger.console_bytes`` the oldest go as new ones come, not an hour later."""
    bound = 1024 * 1024
    records = Records.open(RecordSettings(None, 64 * 1024 * 1024, None, bound, None), replica="r")
    book = ConsoleBook(records, 64 * 1024)
    try:
        for n in range(40):  # each record near its 64 KiB: 2.5 MiB in all
            request = cleaned(pool, policy, f"s{n}", [big(c) for c in "abcdef"])
            book.note(request, route="anthropic", user_agent="", now=float(n))

        def held() -> int:
            with records.store().connection() as connection:
                return int(connection.execute(sa.select(sa.func.sum(REQUESTS.c.bytes))).scalar())

        assert wait_for(lambda: held() <= bound * 5 // 4), held()
        assert queries.session(records.store(), "s39")["requests"] == 1  # type: ignore[index]
        assert queries.requests(records.store(), "s39", limit=1)  # the latest is kept
    finally:
        records.close()
