"""Which conversation a request belongs to: the agent's own id, from the headers and bodies
the real CLIs sent (tests/recorded/), else a digest that survives moved cache markers and
parts two conversations that open alike."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from locations import RECORDED

from middleware.conversations.keys import HEADERS, SessionKey, session_of
from middleware.formats import get_codec
from middleware.formats.wire.openai import OpenAIChatCodec


def recorded(name: str) -> list[dict[str, Any]]:
    requests: list[dict[str, Any]] = json.loads((RECORDED / name).read_text("utf-8"))["requests"]
    return requests


def key_of(request: dict[str, Any]) -> SessionKey:
    return session_of({k.lower(): v for k, v in request["headers"].items()}, request["body"])


@pytest.mark.parametrize(
    ("name", "source", "id_of"),
    [
        (
            "claude-code-2.1.197.json",
            "x-claude-code-session-id",
            lambda r: r["headers"]["x-claude-code-session-id"],
        ),
        ("codex-0.171.0.json", "session-id", lambda r: r["headers"]["session-id"]),
        ("opencode-1.18.33.json", "x-session-id", lambda r: r["headers"]["x-session-id"]),
        ("opencode-1.18.33-openai.json", "session-id", lambda r: r["headers"]["x-session-id"]),
    ],
)
def test_each_agent_is_known_by_its_own_session_id(name: str, source: str, id_of: Any) -> None:
    requests = recorded(name)
    keys = {key_of(r) for r in requests}
    assert keys == {SessionKey(id_of(requests[0]), source)}


def test_an_agents_id_in_the_body_is_used_when_its_headers_are_gone() -> None:
    """A gateway in between may drop custom headers: Codex's ``prompt_cache_key`` and
    Claude Code's ``metadata.user_id`` still name the session."""
    codex = recorded("codex-0.171.0.json")[1]
    assert session_of({}, codex["body"]) == SessionKey(
        codex["body"]["prompt_cache_key"], "prompt_cache_key"
    )
    claude = recorded("claude-code-2.1.197.json")[1]
    session = json.loads(claude["body"]["metadata"]["user_id"])["session_id"]
    assert session_of({}, claude["body"]) == SessionKey(session, "metadata.user_id")
    stored = {"conversation": {"id": "conv_68a1"}, "input": [{"role": "user", "content": "hi"}]}
    assert session_of({}, stored) == SessionKey("conv_68a1", "conversation")


def test_the_clients_own_header_comes_first_and_blank_values_are_skipped() -> None:
    opencode = recorded("opencode-1.18.33.json")[1]
    headers = {k.lower(): v for k, v in opencode["headers"].items()}
    assert session_of({**headers, "x-chatcli-session": "mine"}, opencode["body"]).session == "mine"
    blank = {**headers, "x-chatcli-session": "  ", "x-session-id": ""}
    assert session_of(blank, opencode["body"]).source == "opening"
    assert HEADERS[0] == "x-chatcli-session"


def anonymous(request: dict[str, Any]) -> dict[str, Any]:
    """The body of a recorded request as a client that names no session sends it."""
    body = copy.deepcopy(request["body"])
    for field in ("prompt_cache_key", "metadata", "client_metadata"):
        body.pop(field, None)
    return dict(body)


def test_without_ids_moved_cache_markers_keep_the_conversation() -> None:
    """opencode marks its first user message on the first request only, then marks the
    latest turn: the digest ignores both markers (it used to part the session in two)."""
    title, first, second = recorded("opencode-1.18.33.json")
    assert first["body"]["messages"][0]["content"][0].get("cache_control")
    assert not second["body"]["messages"][0]["content"][0].get("cache_control")
    reply_marked = anonymous(second)
    unmarked = copy.deepcopy(reply_marked)
    for message in unmarked["messages"]:
        for block in message["content"]:
            block.pop("cache_control", None)
    assert session_of({}, reply_marked) == session_of({}, unmarked)
    # A later request of the conversation repeats its opening and first reply.
    later = copy.deepcopy(unmarked)
    later["messages"] += [
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        {
            "role": "user",
            "content": [{"type": "text", "text": "again", "cache_control": {"type": "ephemeral"}}],
        },
    ]
    later["system"] = [{**later["system"][0], "cache_control": {"type": "ephemeral"}}]
    assert session_of({}, later) == session_of({}, unmarked)
    assert session_of({}, anonymous(title)) != session_of({}, unmarked)  # another prompt


def test_without_ids_two_conversations_that_open_alike_part_at_their_first_reply() -> None:
    """Two ``codex exec`` runs in one folder send the same opening; the model's first
    reply (its call ids) sets them apart, so they never share a workspace or a DELETE."""
    _, with_call = recorded("codex-0.171.0.json")
    one = anonymous(with_call)
    two = copy.deepcopy(one)
    for item in two["input"]:
        if "call_id" in item:
            item["call_id"] = "call_other_run"
    assert session_of({}, one) != session_of({}, two)
    assert session_of({}, one).source == "opening"
    # Items renumbered from request to request (their id and status) are not the opening.
    renumbered = copy.deepcopy(one)
    for item in renumbered["input"]:
        item.pop("id", None)
        item.pop("status", None)
    assert session_of({}, renumbered) == session_of({}, one)


@pytest.mark.parametrize(
    "history",
    [
        # Chat Completions: the first reply's call ids
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
         {"role": "assistant", "content": None, "tool_calls": [
             {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
         {"role": "tool", "tool_call_id": "call_1", "content": "out"}],
        # Anthropic: a reply without calls is known by its text, its thinking left out
        [{"role": "user", "content": "U"},
         {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
                                           {"type": "text", "text": "Hello."}]},
         {"role": "user", "content": "more"}],
    ],
)  # fmt: skip
def test_the_first_reply_is_what_parts_conversations(history: list[dict[str, Any]]) -> None:
    key = session_of({}, {"messages": history})
    at = next(i for i, m in enumerate(history) if m["role"] == "assistant")
    other = copy.deepcopy(history)
    if other[at].get("tool_calls"):
        other[at]["tool_calls"][0]["id"] = "call_2"
        other[at + 1]["tool_call_id"] = "call_2"
    else:
        other[at]["content"][1]["text"] = "Hi there."
    assert session_of({}, {"messages": other}) != key
    if not history[at].get("tool_calls"):  # a client that drops old thinking blocks
        dropped = copy.deepcopy(history)
        dropped[at]["content"] = dropped[at]["content"][1:]
        assert session_of({}, {"messages": dropped}) == key


@given(
    system=st.text(max_size=30),
    user=st.text(max_size=30),
    marks=st.lists(st.booleans(), min_size=2, max_size=2),
    as_blocks=st.booleans(),
)
def test_a_system_prompt_sent_as_text_or_as_marked_blocks_is_the_same_opening(
    system: str, user: str, marks: list[bool], as_blocks: bool
) -> None:
    def block(text: str, marked: bool) -> dict[str, Any]:
        return {
            "type": "text",
            "text": text,
            **({"cache_control": {"type": "ephemeral"}} if marked else {}),
        }

    plain = {"system": system, "messages": [{"role": "user", "content": user}]}
    marked = {
        "system": [block(system, marks[0])],
        "messages": [{"role": "user", "content": [block(user, marks[1])] if as_blocks else user}],
    }
    assert session_of({}, plain) == session_of({}, marked)


def test_a_long_id_is_cut_and_an_id_of_any_characters_is_kept() -> None:
    assert len(session_of({"x-chatcli-session": "a" * 5000}, {}).session) == 256
    assert session_of({}, {"prompt_cache_key": "équipe/alice"}).session == "équipe/alice"


class _FirstWords(OpenAIChatCodec):
    """A format whose conversations are known by their first user message's first word."""

    def opening(self, body: Mapping[str, Any]) -> Any | None:
        first = body.get("messages", [{}])[0].get("content")
        return first.split()[0] if isinstance(first, str) and first.strip() else None


def test_a_format_says_what_its_conversations_repeat() -> None:
    codec = _FirstWords()
    one = {"messages": [{"role": "user", "content": "Deploy the app."}]}
    two = {"messages": [{"role": "user", "content": "Deploy it again, please."}]}
    assert session_of({}, one, codec) == session_of({}, two, codec)
    assert session_of({}, one, codec).source == "opening"
    assert session_of({}, one) != session_of({}, two)  # the shared reading tells them apart
    blank = {"messages": [{"role": "user", "content": " "}]}
    # None: the shared reading, in the codec's format
    assert session_of({}, blank, codec) == session_of({}, blank, get_codec(codec.name))
    assert session_of({"session-id": "s1"}, one, codec).session == "s1"  # a named one wins


def test_a_resumed_gemini_cli_session_is_known_by_its_first_reply() -> None:
    """Gemini CLI names no session and rewrites its session context when it resumes; the
    ids of the first reply's calls, which it keeps, are the conversation's."""
    first, resumed = recorded("gemini-cli-0.61.0.json")
    gemini = get_codec("gemini")
    assert first["body"]["contents"][0] != resumed["body"]["contents"][0]  # rewritten
    key = session_of({}, first["body"], gemini)
    assert key == session_of({}, resumed["body"], gemini)
    assert key.source == "call_ids"  # said as it is (issue 38, item 4): not "opening"
    opening = {**first["body"], "contents": first["body"]["contents"][:1]}
    before = session_of({}, opening, gemini)  # before the reply: the opening alone
    assert before != key and before.source == "opening"
    claims = {k.lower(): v for k, v in first["headers"].items()}
    assert gemini.provider.claims(claims, {})


def test_conversations_that_open_alike_in_two_formats_are_two() -> None:
    """A Chat Completions, a Responses and an Anthropic history with the same system
    prompt, first user message and first call id (issue 38, item 4: the first two shared
    a key): the format is part of the digest, and each keeps its key as it goes on."""
    bodies = {
        "openai": {
            "messages": [
                {"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": "List the files."},
                {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function"}]},
            ]
        },
        "responses": {
            "instructions": "You are a coding agent.",
            "input": [
                {"type": "message", "role": "user", "content": "List the files."},
                {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"},
            ],
        },
        "anthropic": {
            "system": "You are a coding agent.",
            "messages": [
                {"role": "user", "content": "List the files."},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1"}]},
            ],
        },
    }
    assert len({session_of({}, body).session for body in bodies.values()}) == 1  # alike
    keys = {fmt: session_of({}, body, get_codec(fmt)) for fmt, body in bodies.items()}
    assert len({key.session for key in keys.values()}) == 3
    assert {key.source for key in keys.values()} == {"opening"}
    chat = bodies["openai"]
    later = {"messages": [*chat["messages"], {"role": "tool", "tool_call_id": "call_1"}]}
    assert session_of({}, later, get_codec("openai")) == keys["openai"]
