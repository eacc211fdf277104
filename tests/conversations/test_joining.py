"""The requests of a Gemini CLI run that its history alone does not name (its model
router's calls, its opening request) filed under the conversation they belong to, on the
shapes Gemini CLI 0.61 sends (tests/gemini_run_builders.py); the conversation is known by
its first reply's call ids (:mod:`middleware.conversations.keys`)."""

from __future__ import annotations

from typing import Any

import pytest
from gemini_run_builders import CLI, CONTEXT, PROMPT, SDK, run

from middleware.conversations.joining import JOINED, Lobby
from middleware.conversations.keys import RunPart, SessionKey, run_part, session_of
from middleware.formats import get_codec

GEMINI = get_codec("gemini")


def part(body: dict[str, Any], headers: dict[str, str] = CLI) -> RunPart:
    found = run_part(headers, body, GEMINI)
    assert found is not None
    return found


def key(body: dict[str, Any]) -> SessionKey:
    return session_of(CLI, body, GEMINI)


def test_what_each_request_of_a_run_is() -> None:
    """The router's calls are side calls; the opening request and the router call before
    it wait for the conversation; what they say is what the conversation repeats (the
    router's ``NAME__ID`` read as ``ID``, thoughts left out); another client's requests
    are not read."""
    one = run("run_shell_command_1796194697991_0")
    parts = {name: part(body) for name, body in one.items()}
    assert [(p.side, p.replies, p.waits) for p in parts.values()] == [
        (True, 0, True),
        (False, 0, True),
        (False, 1, False),
        (True, 2, True),
        (False, 2, False),
    ]
    assert parts["router"].said == parts["opening"].said == (f"user:{CONTEXT}", f"user:{PROMPT}")
    assert parts["router again"].said == parts["again"].said  # the ids as the conversation's
    assert "call:run_shell_command_1796194697991_0" in parts["again"].said
    assert not any("Thinking" in said for said in parts["again"].said)
    assert run_part(SDK, one["opening"], GEMINI) is None
    assert run_part(CLI, one["opening"], get_codec("anthropic")) is None  # not read there
    # Keyed by the request alone, one run is four sessions: the router's first call, the
    # opening request, the conversation, the router's copy of the conversation.
    assert len({key(body).session for body in one.values()}) == 4


class Filed:
    """Where each request was filed."""

    def __init__(self) -> None:
        self.under: dict[str, SessionKey] = {}

    def __call__(self, name: str) -> Any:
        return lambda key: self.under.__setitem__(name, key)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def lobby() -> Any:
    made = Lobby(clock=Clock())
    yield made
    made.close()


def send(lobby: Lobby, filed: Filed, name: str, body: dict[str, Any], caller: str = "k1") -> None:
    """``body`` sent and answered: waiting, or taking what waited for it."""
    sent, found = part(body), key(body)
    if sent.waits:
        lobby.wait(found, sent, caller).end(filed(name))
    else:
        lobby.claim(found, sent, caller)
        filed(name)(found)


def test_one_run_is_one_session() -> None:
    lobby, filed = Lobby(clock=Clock()), Filed()
    one = run("run_shell_command_1796194697991_0")
    for name, body in one.items():
        send(lobby, filed, name, body)
    conversation = key(one["first"]).session
    assert {k.session for k in filed.under.values()} == {conversation}
    assert {name: k.source for name, k in filed.under.items()} == {
        "router": JOINED,
        "opening": JOINED,
        "first": "call_ids",
        "router again": JOINED,
        "again": "call_ids",
    }
    assert len(lobby) == 0
    lobby.close()


def test_two_runs_alike_at_once_are_two_sessions(lobby: Lobby) -> None:
    """Two runs of one prompt in one folder send alike router calls and opening requests;
    each conversation takes one opening request, the first it sees."""
    filed = Filed()
    one, two = run("run_shell_command_1_0"), run("run_shell_command_2_0")
    for name in ("router", "opening"):
        send(lobby, filed, f"{name} 1", one[name])
        send(lobby, filed, f"{name} 2", two[name])
    for name in ("first", "router again", "again"):
        send(lobby, filed, f"{name} 2", two[name])  # the second run's answer came first
        send(lobby, filed, f"{name} 1", one[name])
    sessions = {key(one["first"]).session, key(two["first"]).session}
    assert {k.session for k in filed.under.values()} == sessions
    for session in sessions:
        under = [name for name, k in filed.under.items() if k.session == session]
        assert sum(name.startswith("opening") for name in under) == 1
        assert sum(name.startswith("router again") for name in under) == 1
    routers = [filed.under[f"router {n}"].session for n in (1, 2)]
    assert routers[0] == filed.under["opening 1"].session  # went with the opening that took it


def test_a_conversation_takes_no_opening_after_its_first_request(lobby: Lobby) -> None:
    """A conversation's later request repeats its opening too: it leaves a new run's alike
    opening request for that run's conversation; another caller's, it never takes."""
    filed = Filed()
    one, two = run("run_shell_command_1_0"), run("run_shell_command_2_0")
    for name in ("router", "opening", "first"):
        send(lobby, filed, f"{name} 1", one[name])
    send(lobby, filed, "opening 2", two["opening"])
    send(lobby, filed, "opening 3", two["opening"], caller="k2")
    assert lobby.claim(key(one["first"]), part(one["first"]), "k1") == 0  # sent again
    assert lobby.claim(key(one["again"]), part(one["again"]), "k1") == 0
    assert lobby.claim(key(two["first"]), part(two["first"]), "k1") == 1
    assert filed.under["opening 2"].session == key(two["first"]).session
    assert "opening 3" not in filed.under  # another caller's


def test_what_no_request_takes_is_filed_under_its_own_key_in_time() -> None:
    """An opening request whose answer called no tool (its run ends, or its next prompt
    comes later): filed under its own key once :data:`JOIN_SECONDS` have passed since its
    answer, with the router call it took; a request still answered when the lobby closes
    is filed as its answer ends."""
    clock, filed = Clock(), Filed()
    lobby = Lobby(seconds=120, clock=clock)
    one = run("run_shell_command_1_0")
    send(lobby, filed, "router", one["router"])
    send(lobby, filed, "opening", one["opening"])
    clock.now += 119
    assert lobby.sweep() == 0 and not filed.under
    clock.now += 1
    assert lobby.sweep() == 2
    assert filed.under == {
        "router": SessionKey(key(one["opening"]).session, JOINED),
        "opening": key(one["opening"]),
    }
    waiting = lobby.wait(key(one["opening"]), part(one["opening"]), "k1")
    lobby.close()
    waiting.end(filed("late"))
    assert filed.under["late"] == key(one["opening"])


def test_the_lobby_is_bounded() -> None:
    filed = Filed()
    lobby = Lobby(most=2, clock=Clock())
    one = run("run_shell_command_1_0")
    for n in range(3):
        send(lobby, filed, f"opening {n}", one["opening"], caller=f"k{n}")
    assert len(lobby) == 2 and filed.under == {"opening 0": key(one["opening"])}
    lobby.close()
    assert len(filed.under) == 3


def test_an_opening_request_takes_a_router_call_still_on_its_way(lobby: Lobby) -> None:
    """The CLI opens its conversation once the router's answer came, which the proxy may
    count as ended a moment later: a router call still on its way is taken when none on
    the same opening has ended (when one has, those on their way are another run's)."""
    filed, one = Filed(), run("run_shell_command_1_0")
    routing = lobby.wait(key(one["router"]), part(one["router"]), "k1")
    send(lobby, filed, "opening", one["opening"])
    routing.end(filed("router"))
    send(lobby, filed, "first", one["first"])
    assert filed.under["router"] == SessionKey(key(one["first"]).session, JOINED)
