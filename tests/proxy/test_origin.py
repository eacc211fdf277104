"""The proxy's own routes answer only their own origin (issue 43, items 1, 3 and 4), over
loopback with the ``Host``, ``Origin`` and ``Sec-Fetch-Site`` headers a browser would send.

* DNS rebinding: a page at ``evil.example`` whose name now resolves to 127.0.0.1 sends
  loopback requests with ``Host: evil.example``; they read a spilled secret through
  ``/recall``, listed the sessions and deleted one. Now the own routes answer 421 unless
  ``Host`` names the proxy (an IP address, ``localhost``, ``proxy.allowed_hosts``);
  relayed provider routes answer any name (agents in containers use other names).
* Cross-site requests: preflights of own routes are answered by the proxy, granting
  nothing, never forwarded upstream; a cross-site ``DELETE /sessions/...`` is refused; a
  "simple" cross-site POST (``text/plain``, a form, no content type) to a cleaned route
  runs no step and writes no spill file.
* Same-origin content: only the providers' API paths are relayed; relayed HTML is
  sandboxed; the console's answers carry a Content-Security-Policy and their kin.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

pytest.importorskip("starlette", reason="the proxy tests need the [proxy] extra")

from proxy_stack import Stack, running
from servers import serving
from stand_in import Provider
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

SESSION = "rebound-session-0001"
SECRET = "AKIA-THE-AGENTS-SECRET-0042"
ANTHROPIC = {
    "x-api-key": "sk-ant-test",
    "anthropic-version": "2023-06-01",
    "x-claude-code-session-id": SESSION,
}
EVIL = "evil.example"
#: The proxy's own routes, each as a rebinding page would call it.
OWN = [
    ("GET", "/ui/"), ("GET", "/ui/static/console.js"), ("GET", "/ui/api/sessions"),
    ("GET", f"/ui/api/sessions/{SESSION}"), ("GET", "/ui/api/proxy"), ("GET", "/sessions"),
    ("GET", f"/sessions/{SESSION}"), ("GET", "/healthz"), ("GET", "/metrics"),
]  # fmt: skip
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def spilled_body() -> dict[str, Any]:
    """A request whose tool result is big enough to be spilled, a secret in it (what an
    agent's ``cat .env`` brings back)."""
    output = "".join(f"line {i:04d}: {SECRET} build step output output\n" for i in range(400))
    return {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [
        {"role": "user", "content": "Build it."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_build", "name": "Bash", "input": {"command": "env"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_build", "content": output},
        ]},
    ]}  # fmt: skip


def spill_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "spill").rglob("tool-results/*"))


def call(
    stack: Stack, method: str, path: str, host: str | None = None, **headers: str
) -> httpx.Response:
    """``method path`` on the proxy over loopback, with ``Host: host`` (the proxy's own
    address when ``None``) and ``headers`` as given."""
    sent = {"host": host if host is not None else urlsplit(stack.url).netloc, **headers}
    sent = {name.replace("_", "-"): value for name, value in sent.items()}
    return httpx.request(method, stack.url + path, headers=sent, timeout=30)


@pytest.fixture
def spilled(stack: Stack, tmp_path: Path) -> tuple[Stack, str]:
    """The proxy after a request whose output it spilled: the spill file's name."""
    sent = httpx.post(
        stack.url + "/v1/messages", json=spilled_body(), headers=ANTHROPIC, timeout=60
    )
    assert sent.status_code == 200, sent.text
    (path,) = spill_files(tmp_path)
    assert SECRET in path.read_text("utf-8")
    return stack, path.name


# -- item 1: DNS rebinding ----------------------------------------------------------------


def test_a_rebound_name_reads_no_spilled_secret_lists_nothing_and_ends_no_session(
    spilled: tuple[Stack, str], tmp_path: Path
) -> None:
    stack, name = spilled
    recalled = call(stack, "GET", f"/recall/{SESSION}/{name}", host=EVIL)
    assert recalled.status_code == 421, recalled.text[:300]
    assert SECRET not in recalled.text and "proxy.allowed_hosts" in recalled.text
    for method, path in OWN:
        refused = call(stack, method, path, host=EVIL)
        assert refused.status_code == 421, (path, refused.status_code, refused.text[:200])
        assert SESSION not in refused.text
    ended = call(stack, "DELETE", f"/sessions/{SESSION}", host=f"{EVIL}:{urlsplit(stack.url).port}")
    assert ended.status_code == 421
    assert [p.name for p in spill_files(tmp_path)] == [name]  # not removed
    # The proxy's own names: its address, other IP literals, localhost.
    port = urlsplit(stack.url).port
    for host in (f"127.0.0.1:{port}", "127.0.0.1", f"localhost:{port}", "LOCALHOST",
                 f"[::1]:{port}", "10.20.30.40", "[fe80::1]"):  # fmt: skip
        read = call(stack, "GET", f"/recall/{SESSION}/{name}", host=host)
        assert read.status_code == 200 and SECRET in read.text, host


def test_names_the_policy_allows_and_nothing_like_them(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    allowed = ["proxy.internal", "*.corp.example"]
    overrides = {"proxy.allowed_hosts": allowed, "recall.url": "http://agents-proxy.lan:8787"}
    with running(provider, tmp_path, **overrides) as stack:
        statuses = {
            host: call(stack, "GET", "/healthz", host=host).status_code
            for host in (
                "proxy.internal", "PROXY.Internal:8787", "a.corp.example", "b.a.corp.example:1",
                "agents-proxy.lan:8787", "corp.example", "evilcorp.example",
                "proxy.internal.evil.example", "xproxy.internal", "localhost.evil.example",
                "127.0.0.1.nip.io", "proxy.internal.", "a.corp.example.evil", "", "[::1",
                "evil.example@127.0.0.1",
            )
        }  # fmt: skip
    assert statuses == {
        "proxy.internal": 200, "PROXY.Internal:8787": 200, "a.corp.example": 200,
        "b.a.corp.example:1": 200, "agents-proxy.lan:8787": 200,
        "corp.example": 421, "evilcorp.example": 421, "proxy.internal.evil.example": 421,
        "xproxy.internal": 421, "localhost.evil.example": 421, "127.0.0.1.nip.io": 421,
        "proxy.internal.": 421, "a.corp.example.evil": 421, "": 421, "[::1": 421,
        "evil.example@127.0.0.1": 421,
    }  # fmt: skip


def raw_status(stack: Stack, head: bytes) -> int:
    """The status a raw request head gets, on a socket of its own."""
    address = urlsplit(stack.url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall(head)
        answer = b""
        while b"\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def test_a_request_without_one_host_that_names_the_proxy_is_refused(stack: Stack) -> None:
    """No ``Host`` (HTTP/1.0) or two of them: not a name of the proxy's."""
    netloc = urlsplit(stack.url).netloc.encode()
    assert raw_status(stack, b"GET /healthz HTTP/1.0\r\n\r\n") == 421
    two = b"GET /healthz HTTP/1.1\r\nHost: " + netloc + b"\r\nHost: evil.example\r\n\r\n"
    assert raw_status(stack, two) in (400, 421)
    one = b"GET /healthz HTTP/1.1\r\nHost: " + netloc + b"\r\nConnection: close\r\n\r\n"
    assert raw_status(stack, one) == 200


def test_relayed_provider_routes_answer_whatever_name_the_agent_uses(stack: Stack) -> None:
    for host in ("host.docker.internal:8787", EVIL, "chatcli-mw.agents.svc.cluster.local"):
        answer = httpx.post(
            stack.url + "/v1/messages",
            json=spilled_body(),
            timeout=60,
            headers={**ANTHROPIC, "host": host},
        )
        assert answer.status_code == 200, (host, answer.text[:200])
        assert call(stack, "GET", "/v1/models", host=host).status_code == 200


def test_refused_names_are_logged_once_per_interval(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="middleware.proxy"):
        for _ in range(5):
            assert call(stack, "GET", "/ui/api/sessions", host=EVIL).status_code == 421
    lines = [r.getMessage() for r in caplog.records if "proxy.allowed_hosts" in r.getMessage()]
    assert len(lines) == 1 and "'evil.example'" in lines[0], lines


# -- item 3: cross-site requests -----------------------------------------------------------


class Upstream:
    """An upstream that records what reaches it, grants every preflight (as a permissive
    gateway does), and serves HTML on some paths."""

    PAGE = "<html><body><script>fetch('/ui/api/sessions')</script></body></html>"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def app(self) -> Starlette:
        async def anything(request: Request) -> Response:
            self.seen.append((request.method, request.url.path))
            if request.method == "OPTIONS":
                return Response(status_code=204, headers={
                    "access-control-allow-origin": "*", "access-control-allow-methods": "*",
                    "access-control-allow-headers": "*"})  # fmt: skip
            if request.url.path.endswith((".html", "/page", "/")):
                return HTMLResponse(self.PAGE)
            if request.url.path.endswith("/headless"):
                return Response(self.PAGE.encode(), headers={"content-type": ""})
            return JSONResponse({"data": []})

        return Starlette(routes=[Route("/{path:path}", anything, methods=METHODS)])


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[tuple[Upstream, Stack]]:
    recorded = Upstream()
    with serving(recorded.app()) as url, running((Provider(), url), tmp_path) as stack:
        yield recorded, stack


PREFLIGHT = {"origin": "http://evil.example", "access_control_request_method": "DELETE"}


def test_preflights_of_own_routes_are_answered_here_and_grant_nothing(
    upstream: tuple[Upstream, Stack],
) -> None:
    recorded, stack = upstream
    for path in ("/ui/api/sessions", f"/sessions/{SESSION}", "/sessions", "/recall/s/f.txt",
                 "/recall/s", "/healthz", "/ui/", "/metrics"):  # fmt: skip
        answer = call(stack, "OPTIONS", path, **PREFLIGHT)
        granted = [h for h in answer.headers if h.startswith("access-control-allow")]
        assert answer.status_code == 403 and not granted, (path, answer.status_code, granted)
    assert recorded.seen == []
    # A provider route's preflight goes upstream, as before (browser SDKs use it).
    assert call(stack, "OPTIONS", "/v1/messages", **PREFLIGHT).status_code == 204
    assert recorded.seen == [("OPTIONS", "/v1/messages")]


def test_a_cross_site_request_ends_no_session(spilled: tuple[Stack, str], tmp_path: Path) -> None:
    stack, name = spilled
    own = f"http://{urlsplit(stack.url).netloc}"
    for headers in ({"origin": "http://evil.example"}, {"origin": "null"},
                    {"origin": "http://127.0.0.1"}, {"origin": own + ".evil.example"},
                    {"sec_fetch_site": "cross-site"}, {"sec_fetch_site": "same-site"},
                    {"origin": own, "sec_fetch_site": "cross-site"}):  # fmt: skip
        refused = call(stack, "DELETE", f"/sessions/{SESSION}", **headers)
        assert refused.status_code == 403, (headers, refused.status_code)
        assert "cross-site" in refused.text or "Origin" in refused.text
    assert [p.name for p in spill_files(tmp_path)] == [name]
    # The console's own page, a tool on this machine (no Origin): allowed.
    ended = call(stack, "DELETE", f"/sessions/{SESSION}", origin=own, sec_fetch_site="same-origin")
    assert ended.status_code == 200 and ended.json()["removed"] is True
    assert call(stack, "DELETE", f"/sessions/{SESSION}").status_code == 200


#: The content types a page can POST across sites without a preflight, and none at all.
SIMPLE = ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
          "multipart/form-data; boundary=x", None]  # fmt: skip


@pytest.mark.parametrize("content_type", SIMPLE, ids=str)
def test_a_simple_cross_site_post_runs_no_step_and_writes_no_spill(
    stack: Stack, tmp_path: Path, content_type: str | None
) -> None:
    headers = {**ANTHROPIC, "origin": "http://evil.example", "sec-fetch-site": "cross-site"}
    if content_type is not None:
        headers["content-type"] = content_type
    body = json.dumps(spilled_body()).encode()
    answer = httpx.post(stack.url + "/v1/messages", content=body, headers=headers, timeout=60)
    assert answer.status_code == 415, answer.text[:300]
    error = answer.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert "Content-Type: application/json" in error["error"]["message"]
    assert spill_files(tmp_path) == []
    assert stack.provider.accepted == []
    assert stack.proxy.ledger.total()["requests"] == 0
    # The same body declared JSON, as every agent and SDK sends it: spilled.
    headers["content-type"] = "application/json"
    assert (
        httpx.post(
            stack.url + "/v1/messages", content=body, headers=headers, timeout=60
        ).status_code
        == 200
    )
    assert len(spill_files(tmp_path)) == 1


def test_each_provider_refuses_a_body_not_declared_json_in_its_own_shape(stack: Stack) -> None:
    said = [{"role": "user", "content": "hi"}]
    for path, body, headers, shape in (
        ("/v1/chat/completions", {"model": "m", "messages": said},
         {"authorization": "Bearer sk"}, lambda e: e["error"]["type"]),
        ("/v1/responses", {"model": "m", "input": said},
         {"authorization": "Bearer sk"}, lambda e: e["error"]["type"]),
        ("/v1beta/models/gemini-2.5-pro:generateContent",
         {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
         {"x-goog-api-key": "k"}, lambda e: e["error"]["status"]),
    ):  # fmt: skip
        refused = httpx.post(
            stack.url + path,
            content=json.dumps(body),
            headers={**headers, "content-type": "text/plain"},
        )
        assert refused.status_code == 415 and shape(refused.json()), refused.text
        assert "application/json" in refused.text
        taken = httpx.post(stack.url + path, json=body, headers=headers)
        assert taken.status_code == 200, taken.text
    declared = {"content-type": "application/json; charset=utf-8", **ANTHROPIC}
    answer = httpx.post(
        stack.url + "/v1/messages", content=json.dumps(spilled_body()), headers=declared, timeout=60
    )
    assert answer.status_code == 200


# -- item 4: same-origin content from upstream ---------------------------------------------


def test_only_the_providers_api_paths_are_relayed(upstream: tuple[Upstream, Stack]) -> None:
    recorded, stack = upstream
    for path in ("/evil.html", "/", "/index.html", "/api/hello", "/v1", "/uix/",
                 "/static/x.js", "/policy/default/evil.html", "/recall/one-segment",
                 "/ui/../evil.html", "/V1/models", "/v1%2Fmodels"):  # fmt: skip
        for method in ("GET", "POST"):
            answer = call(stack, method, path)
            assert answer.status_code == 404, (method, path, answer.status_code)
            assert "text/html" not in answer.headers.get("content-type", "")
    assert recorded.seen == []
    message = call(stack, "GET", "/evil.html").json()["error"]["message"]
    assert "/v1/" in message and "/evil.html" in message
    relayed = ["/v1/models", "/v1beta/models", "/v1beta1/projects/p", "/v1alpha/x",
               "/upload/v1beta/files", "/policy/preset:lean/v1/models", "//v1/models"]  # fmt: skip
    for path in relayed:
        assert call(stack, "GET", path).status_code == 200, path
    assert len(recorded.seen) == len(relayed)


def test_relayed_html_is_sandboxed(upstream: tuple[Upstream, Stack]) -> None:
    _, stack = upstream
    for path in ("/v1/page", "/v1/files/x.html", "/v1/headless"):
        answer = call(stack, "GET", path)
        assert answer.status_code == 200 and "<script>" in answer.text
        policies = answer.headers.get_list("content-security-policy")
        assert "sandbox" in policies, (path, policies)
        assert answer.headers["x-content-type-options"] == "nosniff"
    json_answer = call(stack, "GET", "/v1/models")
    assert json_answer.json() == {"data": []}
    assert "content-security-policy" not in json_answer.headers  # API answers as they came


def test_the_console_and_the_own_routes_send_their_security_headers(stack: Stack) -> None:
    for path in ("/ui/", "/ui/static/console.js", "/ui/static/console.css",
                 "/ui/api/sessions", "/ui/api/proxy", "/sessions", "/healthz", "/metrics",
                 "/ui/static/nothing.js", "/nowhere"):  # fmt: skip
        headers = call(stack, "GET", path).headers
        policy = headers.get("content-security-policy", "")
        directives = {d.strip().split(" ")[0]: d.strip() for d in policy.split(";") if d.strip()}
        assert directives.get("default-src") == "default-src 'self'", (path, policy)
        assert directives.get("connect-src") == "connect-src 'self'", (path, policy)
        assert directives.get("frame-ancestors") == "frame-ancestors 'none'", (path, policy)
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert headers.get("x-frame-options") == "DENY", path
        assert headers.get("x-content-type-options") == "nosniff", path
        assert headers.get("referrer-policy") == "no-referrer", path


class _Inline(HTMLParser):
    """What of a page a Content-Security-Policy without 'unsafe-inline' would block."""

    def __init__(self) -> None:
        super().__init__()
        self.blocked: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name for name, _ in attrs}
        if tag == "style":
            self.blocked.append("<style>")
        if tag == "script" and "src" not in names:
            self.blocked.append("<script> without src")
        self.blocked += [
            f"{tag} {name}=" for name in names if name == "style" or name.startswith("on")
        ]
        self.blocked += [f"{tag} {v}" for _, v in attrs if (v or "").startswith("javascript:")]
        self._in = tag

    def handle_data(self, data: str) -> None:
        if self._in == "script" and data.strip():
            self.blocked.append("inline script text")


def test_the_page_holds_no_inline_script_or_style() -> None:
    static = resources.files("middleware.proxy.console").joinpath("static")
    parser = _Inline()
    parser.feed(static.joinpath("index.html").read_text("utf-8"))
    assert parser.blocked == []  # what the script does under the policy: test_browser.py
