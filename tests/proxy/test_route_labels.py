"""The proxy's metrics are labelled by route template, never by a name the client chose
(issue 36, item 5): Gemini's paths hold the model (and Vertex's a project and a
location), so a client naming a new model each time must not add a metrics series each
time. The access log keeps the path as it came."""

from __future__ import annotations

import json
import logging
import re

import httpx
import pytest
from proxy_stack import Stack
from waiting import wait_for

BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
HEADERS = {"x-goog-api-key": "test-key"}
#: Models no provider has: each a name a client chose.
MODELS = [f"made-up-{n}" for n in range(40)]
VERTEX = "/v1/projects/{project}/locations/{location}/publishers/google/models"
TEMPLATES = {
    "/v1beta/models/{model}:generateContent",
    "/v1beta/models/{model}:streamGenerateContent",
    VERTEX + "/{model}:generateContent",
    "/v1/messages",
}


def request_series(metrics: str) -> dict[str, float]:
    """``chatcli_proxy_requests_total`` by its route label (summed over statuses)."""
    found: dict[str, float] = {}
    for route, value in re.findall(
        r'^chatcli_proxy_requests_total\{route="([^"]*)",status="\d+"\} (\S+)$', metrics, re.M
    ):
        found[route] = found.get(route, 0.0) + float(value)
    return found


def test_routes_are_counted_by_template_whatever_the_names_in_the_path(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="middleware.proxy.access")
    with httpx.Client(base_url=stack.url, headers=HEADERS, timeout=60) as client:
        for model in MODELS:
            sent = client.post(f"/v1beta/models/{model}:generateContent", json=BODY)
            assert sent.status_code == 200
            streamed = client.post(
                f"/v1beta/models/{model}:streamGenerateContent",
                json=BODY,
                params={"alt": "sse"},
            )
            assert streamed.status_code == 200
            vertex = (
                f"/v1/projects/p-{model}/locations/loc-{model}/publishers/google/"
                f"models/{model}:generateContent"
            )
            assert client.post(vertex, json=BODY).status_code == 200
        # An answer the proxy gives itself is counted under the template too.
        unknown = client.post(
            f"/policy/none-such/v1beta/models/{MODELS[0]}:generateContent", json=BODY
        )
        assert unknown.status_code == 404
        hello = {"role": "user", "content": "hi"}
        message = {"model": "m", "max_tokens": 5, "messages": [hello]}
        assert client.post("/v1/messages", json=message).status_code == 200
        # The proxy counts an exchange once its answer is done, after the client has it.
        assert wait_for(lambda: "/v1/messages" in request_series(client.get("/metrics").text))
        metrics = client.get("/metrics").text
    series = request_series(metrics)
    assert set(series) <= TEMPLATES, (len(series), sorted(set(series) - TEMPLATES)[:3])
    assert series["/v1beta/models/{model}:generateContent"] == len(MODELS) + 1  # the 404
    assert series["/v1/messages"] == 1
    assert not [line for line in metrics.splitlines() if "made-up-" in line]
    # The access log says which path came, under its route.
    lines = [
        json.loads(r.getMessage()) for r in caplog.records if r.name == "middleware.proxy.access"
    ]
    first = next(line for line in lines if line["path"].endswith(f"/{MODELS[0]}:generateContent"))
    assert first["route"] == "/v1beta/models/{model}:generateContent"
