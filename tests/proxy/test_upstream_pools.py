"""The proxy's connections to the upstream (``middleware.proxy.upstream.Upstream``): several
keep-alive pools that together hold at most ``proxy.max_connections``, each request
taking the pool with the fewest requests in flight, so that all the connections allowed
are used at once and never more."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from proxy_stack import running
from servers import serving
from stand_in import Provider

import middleware
from middleware.policy.settings import bind
from middleware.proxy.settings import ProxySettings
from middleware.proxy.upstream import POOLS, Upstream

BODY = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
HEADERS = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}


@pytest.mark.parametrize("allowed", [1, 5, 23])
def test_the_pools_together_hold_at_most_max_connections(tmp_path: Path, allowed: int) -> None:
    stand_in = Provider()
    inner = stand_in.app()
    live = {"now": 0, "most": 0}

    async def slow_upstream(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        live["now"] += 1
        live["most"] = max(live["most"], live["now"])
        try:
            await asyncio.sleep(0.3)  # a model taking its time: the connection stays busy
            await inner(scope, receive, send)
        finally:
            live["now"] -= 1

    async def crowd(url: str) -> list[int]:
        async with httpx.AsyncClient(timeout=60) as client:
            answers = await asyncio.gather(
                *(
                    client.post(
                        url + "/v1/messages",
                        json=BODY,
                        headers={**HEADERS, "x-chatcli-session": f"s{n}"},
                    )
                    for n in range(3 * allowed + 4)
                )
            )
        return [answer.status_code for answer in answers]

    with (
        serving(slow_upstream) as upstream,
        running((stand_in, upstream), tmp_path, **{"proxy.max_connections": allowed}) as stack,
    ):
        statuses = asyncio.run(crowd(stack.url))
    assert statuses == [200] * len(statuses)
    # Never more than allowed; and all of them at once (every pool was used).
    assert live["most"] == allowed


def test_each_request_takes_the_pool_with_the_fewest_in_flight() -> None:
    policy = middleware.load_policy(None, env={}, dotenv_path=False)
    upstream = Upstream(bind(policy, ProxySettings))  # 100 connections
    assert len(upstream.pools) == POOLS

    async def lease_many() -> list[int]:
        taken: list[int] = []
        async with upstream.lease() as first, upstream.lease() as second:
            taken += [upstream.pools.index(first), upstream.pools.index(second)]
            async with upstream.lease() as third:
                taken.append(upstream.pools.index(third))
            assert upstream.in_flight[:3] == [1, 1, 0]
        assert upstream.in_flight == [0] * POOLS
        async with upstream.lease() as again:
            taken.append(upstream.pools.index(again))
        await upstream.aclose()
        return taken

    assert asyncio.run(lease_many()) == [0, 1, 2, 0]
