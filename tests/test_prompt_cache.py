"""The stand-in's prompt cache bills like the providers: a cost ledger checked against it is
only as right as these reads, writes and expiries."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import httpx
import pytest
from prompt_cache import PromptCache, output_tokens, serialise, tokens
from stand_in import Provider, Reply

FIVE_MINUTES = {"type": "ephemeral"}
ONE_HOUR = {"type": "ephemeral", "ttl": "1h"}


class Clock:
    """A clock the test moves by hand, to make cache entries expire."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def text(n: int, mark: dict[str, str] | None = None, word: str = "w") -> dict[str, Any]:
    """A text block of exactly ``n`` tokens (16 of them its JSON), a breakpoint if marked."""
    block: dict[str, Any] = {"type": "text", "text": " ".join([word] * (n - 16))}
    if mark is not None:
        block["cache_control"] = mark
    return block


def turn(role: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "content": list(blocks)}


def message(n: int, role: str = "user", word: str = "w") -> dict[str, Any]:
    """An OpenAI message of exactly ``n`` tokens (16 of them its JSON)."""
    return {"role": role, "content": " ".join([word] * (n - 16))}


def claude(
    cache: PromptCache, system: list[dict[str, Any]], *messages: dict[str, Any]
) -> tuple[int, int, int, int]:
    """(read, 5-minute writes, 1-hour writes, uncached input) billed for one request."""
    body = {"model": "m", "max_tokens": 8, "system": system, "messages": list(messages)}
    usage = cache.usage("anthropic", body, 1)
    creation = usage["cache_creation"]
    five, hour = creation["ephemeral_5m_input_tokens"], creation["ephemeral_1h_input_tokens"]
    assert usage["cache_creation_input_tokens"] == five + hour
    return usage["cache_read_input_tokens"], five, hour, usage["input_tokens"]


def cached(cache: PromptCache, fmt: str, *messages: dict[str, Any]) -> int:
    """The cached tokens an OpenAI request is billed for."""
    if fmt == "openai":
        usage = cache.usage(fmt, {"model": "m", "messages": list(messages)}, 1)
        return int(usage["prompt_tokens_details"]["cached_tokens"])
    usage = cache.usage(fmt, {"model": "m", "input": list(messages)}, 1)
    return int(usage["input_tokens_details"]["cached_tokens"])


def test_the_tokens_are_words_and_punctuation_not_characters() -> None:
    assert tokens('{"a": "b c"}') == ["{", '"', "a", '"', ":", '"', "b", "c", '"', "}"]
    assert tokens("café_1 x-y") == ["café_1", "x", "-", "y"]
    assert len(tokens(serialise(text(600)))) == 600
    assert len(tokens(serialise(message(600)))) == 600
    # hello , world | { " path " : " a . txt " }
    assert output_tokens("hello, world", [{"path": "a.txt"}]) == 14
    assert output_tokens("") == 1


def test_anthropic_writes_cold_then_reads_the_old_prefix_when_the_breakpoint_moves() -> None:
    cache = PromptCache(Clock())
    body = {
        "model": "m",
        "system": [text(600)],
        "messages": [turn("user", text(500, FIVE_MINUTES))],
    }
    assert cache.usage("anthropic", body, 7) == {
        "input_tokens": 0,
        "cache_creation_input_tokens": 1100,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 1100, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 7,
        "service_tier": "standard",
    }
    history = [turn("user", text(500)), turn("assistant", text(50)), turn("user", text(100))]
    history[-1]["content"][-1]["cache_control"] = FIVE_MINUTES
    assert claude(cache, [text(600)], *history) == (1100, 150, 0, 0)
    assert cache.reported[0][0] == "anthropic"
    assert [u["cache_read_input_tokens"] for _, u in cache.reported] == [0, 1100]


def test_anthropic_bills_what_follows_the_last_breakpoint_as_input() -> None:
    cache = PromptCache(Clock())
    assert claude(cache, [text(1100, FIVE_MINUTES)], turn("user", text(40))) == (0, 1100, 0, 40)
    assert claude(cache, [text(1100, FIVE_MINUTES)], turn("user", text(40))) == (1100, 0, 0, 40)
    # No breakpoint: no caching at all, even with the prefix cached.
    assert claude(cache, [text(1100)], turn("user", text(40))) == (0, 0, 0, 1140)


def test_anthropic_entries_expire_after_five_minutes() -> None:
    clock = Clock()
    cache = PromptCache(clock)
    prompt = [text(600)], turn("user", text(500, FIVE_MINUTES))
    assert claude(cache, *prompt) == (0, 1100, 0, 0)
    clock.now = 299.0
    assert claude(cache, [text(600)], turn("user", text(500, FIVE_MINUTES))) == (1100, 0, 0, 0)
    clock.now = 299.0 + 301.0
    assert claude(cache, *prompt) == (0, 1100, 0, 0)


def test_anthropic_reading_keeps_the_entry_alive() -> None:
    clock = Clock()
    cache = PromptCache(clock)
    prompt = [text(600)], turn("user", text(500, FIVE_MINUTES))
    assert claude(cache, *prompt) == (0, 1100, 0, 0)
    clock.now = 290.0  # the breakpoint moved on: the old prefix is read, not stored again
    longer = turn("user", text(500)), turn("assistant", text(50)), turn("user", text(100))
    longer[-1]["content"][-1]["cache_control"] = FIVE_MINUTES
    assert claude(cache, [text(600)], *longer) == (1100, 150, 0, 0)
    clock.now = 589.0  # past the first write's 300 s, within the read's 590
    assert claude(cache, *prompt) == (1100, 0, 0, 0)
    clock.now = 889.0  # the read at 589 kept it until 889, not including it
    assert claude(cache, *prompt) == (0, 1100, 0, 0)


def test_anthropic_one_hour_breakpoints_survive_and_are_billed_as_such() -> None:
    clock = Clock()
    cache = PromptCache(clock)
    system = [text(800, ONE_HOUR)]
    history = turn("user", text(300)), turn("assistant", text(100)), turn("user", text(200))
    history[-1]["content"][-1]["cache_control"] = FIVE_MINUTES
    assert claude(cache, system, *history) == (0, 600, 800, 0)
    clock.now = 3000.0
    assert claude(cache, system, *history) == (800, 600, 0, 0)
    clock.now = 6500.0  # the read at 3000 refreshed the hour
    assert claude(cache, system, *history) == (800, 600, 0, 0)
    clock.now = 6500.0 + 3600.0
    assert claude(cache, system, *history) == (0, 600, 800, 0)


def test_anthropic_caches_nothing_below_the_minimum() -> None:
    cache = PromptCache(Clock())
    prompt = [text(500, FIVE_MINUTES)], turn("user", text(100))
    assert claude(cache, *prompt) == (0, 0, 0, 600)
    assert claude(cache, *prompt) == (0, 0, 0, 600)
    smaller = PromptCache(Clock(), min_tokens=500)
    assert claude(smaller, *prompt) == (0, 500, 0, 100)
    assert claude(smaller, *prompt) == (500, 0, 0, 100)


def test_anthropic_rewrite_of_an_early_message_reads_only_the_prefix_before_it() -> None:
    cache = PromptCache(Clock())
    system = [text(1200, FIVE_MINUTES)]
    words = iter("abcdefghijk")
    u1, a1, u2, a2, u3, a3, u4 = (text(100 + 10 * i, word=next(words)) for i in range(7))

    def ask(*history: dict[str, Any]) -> tuple[int, int, int, int]:
        marked = [turn(m["role"], *(dict(b) for b in m["content"])) for m in history]
        marked[-1]["content"][-1]["cache_control"] = FIVE_MINUTES
        return claude(cache, system, *marked)

    assert ask(turn("user", u1)) == (0, 1300, 0, 0)
    assert ask(turn("user", u1), turn("assistant", a1), turn("user", u2)) == (1300, 230, 0, 0)
    grown = [turn("user", u1), turn("assistant", a1), turn("user", u2), turn("assistant", a2)]
    assert ask(*grown, turn("user", u3)) == (1530, 270, 0, 0)
    # a1 shortened: the prefix before it (system, u1) is still read, all after it written.
    rewritten = [turn("user", u1), turn("assistant", text(50, word="z")), turn("user", u2)]
    history = [*rewritten, turn("assistant", a2), turn("user", u3), turn("assistant", a3)]
    assert ask(*history, turn("user", u4)) == (1300, 50 + 120 + 130 + 140 + 150 + 160, 0, 0)
    # A change in the system prompt leaves nothing to read.
    system[0] = text(1200, FIVE_MINUTES, word="q")
    assert ask(turn("user", u1))[0] == 0


def test_openai_caches_in_steps_of_128_tokens_from_1024() -> None:
    clock = Clock()
    cache = PromptCache(clock)
    assert cached(cache, "openai", message(1000)) == 0
    assert cached(cache, "openai", message(1000)) == 0
    assert cached(cache, "openai", message(1300)) == 0
    assert cached(cache, "openai", message(1300)) == 1280
    grown = message(1300), message(100, "assistant"), message(100)
    assert cached(cache, "openai", *grown) == 1280
    assert cached(cache, "openai", *grown) == 1408
    # The same tokens are the same prefix, whichever messages they came in.
    assert cached(cache, "openai", message(1100)) == 1024
    # Two prompts that differ from token 1100 on share only the checkpoint before it.
    assert cached(cache, "openai", message(1100, word="v"), message(400, word="x")) == 0
    assert cached(cache, "openai", message(1100, word="v"), message(400, word="y")) == 1024
    clock.now = 299.0
    assert cached(cache, "openai", *grown) == 1408
    clock.now = 299.0 + 300.0
    assert cached(cache, "openai", *grown) == 0


def test_openai_usage_shapes() -> None:
    cache = PromptCache(Clock(), openai_ttl=60.0)
    chat = cache.usage("openai", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, 2)
    assert chat == {
        "prompt_tokens": 17,
        "completion_tokens": 2,
        "total_tokens": 19,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    tool = {"type": "function", "name": "f"}  # 17 tokens
    body = {"model": "m", "tools": [tool], "instructions": "be brief", "input": "hi there"}
    assert cache.usage("responses", body, 3) == {
        "input_tokens": 25,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 3,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 28,
    }
    assert cached(cache, "responses", message(1100)) == 0
    assert cached(cache, "responses", message(1100)) == 1024
    cache.clock = lambda: 60.0  # openai_ttl
    assert cached(cache, "responses", message(1100)) == 0
    assert [fmt for fmt, _ in cache.reported] == ["openai", *["responses"] * 4]


def events(stream: str) -> list[tuple[str | None, Any]]:
    """The (event name, data) of a server-sent event stream, data decoded when JSON."""
    found: list[tuple[str | None, Any]] = []
    for chunk in stream.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.split("\n"))
        data = lines["data"]
        found.append((lines.get("event"), data if data == "[DONE]" else json.loads(data)))
    return found


async def stream(
    client: httpx.AsyncClient, path: str, body: dict[str, Any]
) -> list[tuple[str | None, Any]]:
    """The events the stand-in streams in answer to ``body``."""
    return events((await client.post(path, json=body)).text)


def ledger(usages: list[dict[str, Any]]) -> Counter[str]:
    """Every number of every usage summed by its path, as a cost ledger adds them up."""
    total: Counter[str] = Counter()

    def add(value: Any, path: str) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                add(inner, f"{path}.{key}")
        elif isinstance(value, int):
            total[path] += value

    for usage in usages:
        add(usage, "")
    return total


@pytest.mark.anyio
async def test_the_stand_in_reports_what_its_cache_bills() -> None:
    cache = PromptCache(Clock())
    provider = Provider(script=lambda fmt, body: Reply(text="done, all good"), cache=cache)
    spent = 4  # done , all good
    carried: list[dict[str, Any]] = []
    transport = httpx.ASGITransport(app=provider.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://stand-in") as client:
        # Anthropic: not streamed, then streamed with the breakpoint moved on.
        first = [turn("user", text(100, FIVE_MINUTES))]
        body = {"model": "m", "max_tokens": 64, "system": [text(1100)], "messages": first}
        answer = (await client.post("/v1/messages", json=body)).json()
        assert answer["usage"]["cache_creation_input_tokens"] == 1200
        assert answer["usage"]["output_tokens"] == spent
        carried.append(answer["usage"])
        second = [turn("user", text(100)), turn("assistant", text(50)), turn("user", text(60))]
        second[-1]["content"][-1]["cache_control"] = FIVE_MINUTES
        body = {**body, "messages": second, "stream": True}
        streamed = dict(await stream(client, "/v1/messages", body))
        start = streamed["message_start"]["message"]["usage"]
        assert start["cache_read_input_tokens"] == 1200
        assert start["cache_creation_input_tokens"] == 110
        assert start["output_tokens"] == 1
        assert streamed["message_delta"]["usage"] == {"output_tokens": spent}
        carried.append({**start, **streamed["message_delta"]["usage"]})
        counted = await client.post("/v1/messages/count_tokens", json=body)
        assert counted.status_code == 200 and len(cache.reported) == 2

        # Chat Completions: not streamed, streamed with the usage chunk, streamed without.
        history = [message(1300)]
        answer = (await client.post("/v1/chat/completions", json={"messages": history})).json()
        assert answer["usage"]["prompt_tokens"] == 1300
        carried.append(answer["usage"])
        history += [message(100, "assistant"), message(100)]
        body = {"messages": history, "stream": True, "stream_options": {"include_usage": True}}
        chunks = [data for _, data in await stream(client, "/v1/chat/completions", body)]
        assert chunks[-1] == "[DONE]" and chunks[-2]["choices"] == []
        usage = chunks[-2]["usage"]
        assert usage["prompt_tokens_details"]["cached_tokens"] == 1280
        assert usage["completion_tokens"] == spent and usage["total_tokens"] == 1500 + spent
        assert all("usage" not in chunk for chunk in chunks[:-2])
        carried.append(usage)
        body = {"messages": history, "stream": True}
        chunks = [data for _, data in await stream(client, "/v1/chat/completions", body)]
        assert not any("usage" in chunk for chunk in chunks[:-1])
        silent = cache.reported[-1]  # billed all the same
        assert silent[1]["prompt_tokens_details"]["cached_tokens"] == 1408

        # Responses, streamed: only the completed response carries the usage.
        body = {"model": "m", "instructions": "be brief", "input": history, "stream": True}
        streamed = dict(await stream(client, "/v1/responses", body))
        assert streamed["response.created"]["response"]["usage"] is None
        assert streamed["response.in_progress"]["response"]["usage"] is None
        usage = streamed["response.completed"]["response"]["usage"]
        assert usage["input_tokens"] == 1504 and usage["output_tokens"] == spent
        assert usage["input_tokens_details"] == {"cached_tokens": 0}  # a new prefix: instructions
        carried.append(usage)

    reported = [usage for _, usage in cache.reported]
    assert [fmt for fmt, _ in cache.reported] == ["anthropic"] * 2 + ["openai"] * 3 + ["responses"]
    assert reported[:4] + reported[5:] == carried
    assert ledger(carried) + ledger([silent[1]]) == ledger(reported)
    assert ledger(carried)[".cache_read_input_tokens"] == 1200


@pytest.mark.anyio
async def test_without_a_cache_the_usage_stays_the_fixed_one() -> None:
    provider = Provider()
    transport = httpx.ASGITransport(app=provider.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://stand-in") as client:
        body = {"model": "m", "max_tokens": 8, "messages": [turn("user", text(40))]}
        assert (await client.post("/v1/messages", json=body)).json()["usage"] == {
            "input_tokens": 10,
            "output_tokens": 5,
        }
        streamed = dict(await stream(client, "/v1/messages", body | {"stream": True}))
        assert streamed["message_start"]["message"]["usage"] == {
            "input_tokens": 10,
            "output_tokens": 5,
        }
        assert streamed["message_delta"]["usage"] == {"output_tokens": 5}
        body = {
            "messages": [message(40)],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        chunks = [data for _, data in await stream(client, "/v1/chat/completions", body)]
        assert chunks[-2]["usage"] == {
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "total_tokens": 15,
        }
        answer = (await client.post("/v1/responses", json={"input": "hi"})).json()
        assert answer["usage"]["input_tokens_details"] == {"cached_tokens": 0}
        assert answer["usage"]["total_tokens"] == 15
