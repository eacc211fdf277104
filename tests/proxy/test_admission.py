"""Bodies are cleaned at once only while they add up to less than proxy.cleaning_bytes: a
body alone always, in the order they came (issue 26, item 3: eight 32 MB bodies at once)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest
from servers import closed_at_the_end

pytest.importorskip("starlette", reason="the proxy tests need the [proxy] extra")

from proxy_stack import running
from stand_in import Provider
from waiting import wait_for

from middleware.conversations import engine
from middleware.proxy.admission import ByteGate, NotAdmitted


async def cleaned_together(gate: ByteGate, sizes: list[int]) -> tuple[list[int], int]:
    """Clean bodies of ``sizes`` (each taking a few turns of the loop), started in order:
    the order they were admitted in, and the most bytes admitted at once."""
    order: list[int] = []
    most = 0

    async def clean(n: int, size: int) -> None:
        nonlocal most
        async with gate.admitted(size):
            order.append(n)
            most = max(most, gate.held)
            for _ in range(5):
                await anyio.sleep(0)

    async with anyio.create_task_group() as group:
        for n, size in enumerate(sizes):
            group.start_soon(clean, n, size)
            await anyio.sleep(0)  # each starts waiting before the next comes
    assert gate.held == 0
    return order, most


def test_bodies_under_the_limit_together_are_cleaned_at_once() -> None:
    gate = ByteGate(100)
    order, most = anyio.run(cleaned_together, gate, [30, 30, 30])
    assert order == [0, 1, 2] and most == 90


def test_large_bodies_are_cleaned_one_at_a_time_however_large() -> None:
    gate = ByteGate(100)
    order, most = anyio.run(cleaned_together, gate, [90, 90, 500, 90])
    assert order == [0, 1, 2, 3] and most == 500


def test_a_large_body_waiting_is_not_overtaken_by_small_ones() -> None:
    gate = ByteGate(100)
    order, most = anyio.run(cleaned_together, gate, [60, 80, 10, 10])
    # 80 waits for 60; the small ones, though they would fit beside 60, wait behind it
    assert order == [0, 1, 2, 3] and most == 100


async def held(
    group: anyio.abc.TaskGroup, gate: ByteGate, size: int, done: Callable[[], object] = list
) -> anyio.Event:
    """A first body holding ``size`` bytes of ``gate`` (started in ``group``) until the
    event returned is set; ``done`` is called once it has left."""
    inside, release = anyio.Event(), anyio.Event()

    async def first() -> None:
        async with gate.admitted(size):
            inside.set()
            await release.wait()
        done()

    group.start_soon(first)
    await inside.wait()
    return release


def test_a_client_that_leaves_while_waiting_gives_up_its_turn() -> None:
    async def scenario() -> list[str]:
        gate = ByteGate(100)
        events: list[str] = []

        async def leaver(scope: anyio.CancelScope) -> None:
            with scope:
                async with gate.admitted(90):
                    events.append("leaver admitted")

        async def last() -> None:
            async with gate.admitted(50):
                events.append("last admitted")

        scope = anyio.CancelScope()
        async with anyio.create_task_group() as group:
            release_first = await held(group, gate, 90, lambda: events.append("first done"))
            group.start_soon(leaver, scope)
            await anyio.sleep(0)
            group.start_soon(last)
            await anyio.sleep(0)
            scope.cancel()  # the client went away while waiting
            await anyio.sleep(0)
            release_first.set()
        assert gate.held == 0 and not gate._line
        return events

    assert anyio.run(scenario) == ["first done", "last admitted"]


def test_a_body_that_waits_past_its_deadline_leaves_the_line() -> None:
    async def scenario() -> list[str]:
        gate = ByteGate(100)
        events: list[str] = []

        async def impatient() -> None:
            try:
                async with gate.admitted(90, within=0.05):
                    events.append("impatient admitted")
            except NotAdmitted as exc:
                events.append(str(exc))

        async def patient() -> None:
            async with gate.admitted(50, within=30):
                events.append("patient admitted")

        async with anyio.create_task_group() as group:
            release_first = await held(group, gate, 90)
            group.start_soon(impatient)
            await anyio.sleep(0)
            group.start_soon(patient)
            await anyio.sleep(0.3)  # past the impatient one's deadline, not the other's
            assert [size for size, _ in gate._line] == [50]
            release_first.set()
        assert gate.held == 0 and not gate._line
        return events

    assert anyio.run(scenario) == ["not started within 0.05 s", "patient admitted"]


def test_a_body_that_would_overfill_the_line_is_turned_away_at_once() -> None:
    """The bodies waiting add up to the line's limit at most (a body alone may always
    wait, however large): what comes meanwhile is not held in memory."""

    async def scenario() -> tuple[list[str], list[int]]:
        gate = ByteGate(100, line_limit=100)
        events: list[str] = []

        async def body(name: str, size: int) -> None:
            try:
                async with gate.admitted(size, within=30):
                    events.append(f"{name} admitted")
            except NotAdmitted as exc:
                events.append(f"{name}: {exc}")

        async with anyio.create_task_group() as group:
            release_first = await held(group, gate, 90)
            for name, size in (("huge", 500), ("small", 10), ("a", 60), ("b", 50)):
                group.start_soon(body, name, size)
                await anyio.sleep(0)
            waiting = [size for size, _ in gate._line]
            release_first.set()
        assert gate.held == 0 and gate.waiting == 0
        return events, waiting

    events, waiting = anyio.run(scenario)
    assert waiting == [500]  # alone in the line: it waits; the next ones would overfill it
    assert events[:3] == [
        "small: the bodies waiting to be cleaned already take 100 bytes",
        "a: the bodies waiting to be cleaned already take 100 bytes",
        "b: the bodies waiting to be cleaned already take 100 bytes",
    ]
    assert events[3:] == ["huge admitted"]


ANTHROPIC = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}


def conversation(name: str) -> dict[str, Any]:
    """A request whose call has no result: the provider refuses it unless it is repaired."""
    return {"model": "claude-test", "max_tokens": 100, "messages": [
        {"role": "user", "content": f"Task {name}."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{name}", "name": "Bash", "input": {}}]},
        {"role": "user", "content": "Go on."},
    ]}  # fmt: skip


@dataclass
class SlowCleaning:
    """The first request's cleaning holds its turn from ``started`` until ``release``: the
    proxy is busier than it can keep up with."""

    started: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def slow_cleaning(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowCleaning]:
    slow_one = SlowCleaning()
    started, release = slow_one.started, slow_one.release
    process = engine.process

    def slow(*args: Any, **kwargs: Any) -> Any:
        if not started.is_set():
            started.set()
            release.wait(timeout=60)
        return process(*args, **kwargs)

    monkeypatch.setattr(engine, "process", slow)
    yield slow_one
    release.set()


def test_a_body_not_cleaned_in_time_goes_through_as_it_came(
    provider: tuple[Provider, str],
    tmp_path: Path,
    slow_cleaning: SlowCleaning,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 26: every wait has a deadline. The request is never held past
    proxy.cleaning_wait_seconds waiting for its turn: it is forwarded unchanged, counted,
    and the access log says why; the request being cleaned is unaffected."""
    limits = {"proxy.cleaning_bytes": 1, "proxy.cleaning_wait_seconds": 0.5}
    with (
        running(provider, tmp_path, **limits) as stack,
        ThreadPoolExecutor(1) as pool,
        caplog.at_level(logging.INFO, logger="middleware.proxy.access"),
    ):
        url = stack.url + "/v1/messages"
        first = pool.submit(httpx.post, url, json=conversation("a"), headers=ANTHROPIC, timeout=60)
        assert slow_cleaning.started.wait(timeout=30)
        late = httpx.post(url, json=conversation("b"), headers=ANTHROPIC, timeout=60)
        # sent as it came: the stand-in refuses the unrepaired call, as the provider would
        assert late.status_code == 400
        assert stack.provider.refused[-1][2] == conversation("b")
        assert 'chatcli_proxy_passthrough_total{reason="busy"} 1.0' in (
            httpx.get(stack.url + "/metrics").text
        )
        slow_cleaning.release.set()  # (releases the first request's cleaning)
        assert first.result().status_code == 200  # repaired, as ever
        assert wait_for(lambda: len(caplog.records) >= 2)
        lines = [json.loads(r.getMessage()) for r in caplog.records]
    assert [line.get("untouched") for line in lines] == ["busy", None]


def test_fail_closed_a_body_not_cleaned_in_time_gets_503_in_the_providers_shape(
    provider: tuple[Provider, str], tmp_path: Path, slow_cleaning: SlowCleaning
) -> None:
    anthropic = pytest.importorskip("anthropic")
    limits = {
        "proxy.cleaning_bytes": 1,
        "proxy.cleaning_wait_seconds": 0.5,
        "proxy.fail_open": False,
    }
    with running(provider, tmp_path, **limits) as stack, ThreadPoolExecutor(1) as pool:
        url = stack.url + "/v1/messages"
        first = pool.submit(httpx.post, url, json=conversation("a"), headers=ANTHROPIC, timeout=60)
        assert slow_cleaning.started.wait(timeout=30)
        client = closed_at_the_end(
            anthropic.Anthropic(api_key="sk-test", base_url=stack.url, max_retries=0)
        )
        with pytest.raises(anthropic.APIStatusError) as raised:
            client.messages.create(**conversation("b"))
        assert raised.value.status_code == 503
        assert raised.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
        assert "proxy.cleaning_wait_seconds" in str(raised.value)
        slow_cleaning.release.set()
        assert first.result().status_code == 200
        assert [body for _, _, body in stack.provider.accepted] != []
        assert all(b["messages"][0]["content"] != "Task b." for _, _, b in stack.provider.accepted)
