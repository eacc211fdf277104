"""The URL a request is forwarded to stays under the upstream's configured base URL (issue
36, item 3). A path with dot-segments, plain or percent-encoded, or hidden behind encoded
slashes and backslashes, once reached ``/secret-admin`` on an upstream configured as
``http://host/gw/openai``, with the client's key (Gemini's ``?key=`` too): on every model
route (the Gemini ``{model}`` and Vertex ``{project}``/``{location}`` segments included) and
on every other path, the proxy now refuses it with a 400 in the provider's shape, and the
upstream, a real server on loopback, receives nothing outside its base."""

from __future__ import annotations

import http.client
import json
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

pytest.importorskip("starlette", reason="the proxy tests need the [proxy] extra")

from servers import serving

from middleware.formats import CODECS
from middleware.formats.base import Codec
from middleware.proxy.build import build_proxy

BASES = {"anthropic": "/gw/anthropic", "openai": "/gw/openai", "gemini": "/gw/gemini"}
#: A segment's values that are not dot-segments, for the legitimate request of each route.
FILLED = {"model": "gemini-2.5-flash", "project": "p-1", "location": "us-central1"}
#: Eight dot-segments then ``secret-admin``, written in the ways a server may read as
#: ``../``: plain, percent-encoded dots, encoded slashes, backslashes plain and encoded, a
#: Tomcat path parameter.
CLIMBS = [
    sep.join([dots] * 8 + ["secret-admin"])
    for dots, sep in [
        ("..", "/"), ("..", "%2F"), ("..", "%2f"), ("%2e%2e", "/"), ("%2E%2E", "%2F"),
        (".%2e", "/"), ("..", "%5C"), ("..", "\\"), ("..;x", "/"), ("%252e%252e", "%252f"),
    ]
]  # fmt: skip
#: A single dot, for a path that only has to look one segment up.
SINGLE = ["..", "%2e%2e", ".", "%2e"]


@dataclass
class Received:
    path: str  # as it came on the request line, percent-encoding and all
    query: str
    headers: dict[str, str]


class Recorder:
    """An upstream that records every request it receives and answers ``{}``."""

    def __init__(self) -> None:
        self.received: list[Received] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        while (await receive()).get("more_body"):
            pass
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        self.received.append(
            Received(scope["raw_path"].decode("latin-1"), scope["query_string"].decode(), headers)
        )
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})  # fmt: skip
        await send({"type": "http.response.body", "body": b"{}"})


@dataclass
class Stack:
    recorder: Recorder
    proxy: str  # host:port


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    recorder = Recorder()
    with serving(recorder) as upstream:
        _, app = build_proxy(
            None,
            {
                "proxy.upstreams": {name: upstream + base for name, base in BASES.items()},
                "spill.root": str(tmp_path_factory.mktemp("paths") / "spill"),
            },
        )
        with serving(app) as url:
            yield Stack(recorder, urlsplit(url).netloc)


def landing(path: str) -> str:
    """Where ``path`` ends up on a server that decodes it (as often as it can) and then
    resolves its dot-segments, reading a backslash or a path parameter's ``;`` as a
    separator would: the most any server in front of a provider reads into it."""
    while (decoded := unquote(path)) != path:
        path = decoded
    path = re.sub(r";[^/\\]*", "", path).replace("\\", "/")
    return posixpath.normpath(path)


def request(stack: Stack, codec: Codec, path: str) -> tuple[int, dict[str, Any], list[Received]]:
    """POST ``path`` as written (never normalised by the client) with the route's key and
    a body of its format; the proxy's status, its answer and what the upstream received."""
    headers, query = {"content-type": "application/json"}, ""
    said = [{"role": "user", "content": "hi"}]
    bodies = {
        "anthropic": {"model": "m", "max_tokens": 5, "messages": said},
        "openai": {"model": "m", "messages": said},
        "responses": {"model": "m", "input": "hi"},
        "gemini": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    }
    if codec.provider.name == "anthropic":
        headers |= {"x-api-key": "sk-ant-SECRET", "anthropic-version": "2023-06-01"}
    elif codec.provider.name == "openai" or "/projects/" in path:  # OpenAI, or Vertex
        headers["authorization"] = "Bearer SECRET-token"
    else:
        query = "?key=AIza-SECRET"
    before = len(stack.recorder.received)
    connection = http.client.HTTPConnection(stack.proxy, timeout=60)
    try:
        connection.request("POST", path + query, json.dumps(bodies[codec.name]), headers)
        answer = connection.getresponse()
        status, document = answer.status, json.loads(answer.read() or b"{}")
    finally:
        connection.close()
    return status, document, stack.recorder.received[before:]


def hostile_paths(template: str) -> list[str]:
    """``template`` with dot-segments where a client controls the path: each of its
    ``{segments}``, after it, and alone at the root."""
    filled = template.format(**FILLED)
    paths = ["/" + climb for climb in CLIMBS]
    paths += [filled + "/" + climb for climb in CLIMBS]
    paths += ["/policy/preset:lean/" + climb for climb in CLIMBS[:3]]
    for name in re.findall(r"\{(\w+)\}", template):
        for value in CLIMBS + SINGLE:
            paths.append(template.format(**{**FILLED, name: value}))
    return paths


ROUTES = [(codec, route.path) for codec in CODECS.values() for route in codec.proxy_routes]


@pytest.mark.parametrize(("codec", "template"), ROUTES, ids=[f"{c.name}:{t}" for c, t in ROUTES])
def test_no_path_leaves_the_upstreams_base(stack: Stack, codec: Codec, template: str) -> None:
    base = BASES[codec.provider.name]
    # The route itself reaches the upstream under its base, with the key.
    status, _, received = request(stack, codec, template.format(**FILLED))
    assert status == 200
    assert [r.path for r in received] == [base + template.format(**FILLED)]
    escaping = 0
    for path in hostile_paths(template):
        status, document, received = request(stack, codec, path)
        outside = [r for r in received if not landing(r.path).startswith(base + "/")]
        assert not outside, f"{path} reached {[r.path for r in outside]}"
        if landing(base + path).startswith(base + "/"):
            continue  # a '..' inside a segment ('..:generateContent'): under the base
        escaping += 1
        assert status == 400, f"{path}: {status} {document}"
        assert "error" in document and "dot-segment" in json.dumps(document)  # its shape
        assert not received, f"{path} was forwarded as {[r.path for r in received]}"
    assert escaping >= 2 * len(CLIMBS)


def test_a_path_is_forwarded_as_the_client_encoded_it(stack: Stack) -> None:
    """Its bytes as they came, under the base: an encoded slash stays encoded (an ARN in a
    path), a byte a URL cannot hold is percent-encoded, a policy prefix is taken off."""
    chat = CODECS["openai"]
    sent = {
        "/v1/files/arn%3Aaws%2Fprofile%2Fx": "/gw/openai/v1/files/arn%3Aaws%2Fprofile%2Fx",
        "/v1/files/caf%C3%A9%20x;v=1": "/gw/openai/v1/files/caf%C3%A9%20x;v=1",
        "/v1/files/a\\b": "/gw/openai/v1/files/a\\b",
        "/policy/preset:lean/v1/chat/completions": "/gw/openai/v1/chat/completions",
        "/policy/preset%3Alean//v1/chat/completions": "/gw/openai/v1/chat/completions",
    }
    for path, forwarded in sent.items():
        status, _, received = request(stack, chat, path)
        assert status == 200, path
        assert [r.path for r in received] == [forwarded]
        assert received[0].headers["authorization"] == "Bearer SECRET-token"
