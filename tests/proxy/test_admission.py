"""Bodies are cleaned at once only while they add up to less than proxy.cleaning_bytes: a
body alone always, in the order they came (issue 26, item 3: eight 32 MB bodies at once)."""

from __future__ import annotations

import anyio
import pytest

pytest.importorskip("starlette", reason="the proxy tests need the [proxy] extra")

from middleware.proxy.admission import ByteGate


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


def test_a_client_that_leaves_while_waiting_gives_up_its_turn() -> None:
    async def scenario() -> list[str]:
        gate = ByteGate(100)
        events: list[str] = []
        first_in, release_first = anyio.Event(), anyio.Event()

        async def first() -> None:
            async with gate.admitted(90):
                first_in.set()
                await release_first.wait()
            events.append("first done")

        async def leaver(scope: anyio.CancelScope) -> None:
            with scope:
                async with gate.admitted(90):
                    events.append("leaver admitted")

        async def last() -> None:
            async with gate.admitted(50):
                events.append("last admitted")

        scope = anyio.CancelScope()
        async with anyio.create_task_group() as group:
            group.start_soon(first)
            await first_in.wait()
            group.start_soon(leaver, scope)
            await anyio.sleep(0)
            group.start_soon(last)
            await anyio.sleep(0)
            scope.cancel()  # the client went away while waiting
            await anyio.sleep(0)
            release_first.set()
        assert gate.held == 0 and not gate._waiting
        return events

    assert anyio.run(scenario) == ["first done", "last admitted"]
