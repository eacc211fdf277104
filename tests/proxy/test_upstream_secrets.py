"""A password in an upstream URL is never shown (issue 43, item 11): not by the console's
proxy page, not by ``/healthz``, not in ``chatcli-mw serve``'s start-up line, not in the log
lines and the 502 answer of an upstream that cannot be reached or closes the connection
unanswered; and the proxy still reaches an upstream through it."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

pytest.importorskip("starlette", reason="the proxy tests need the [proxy] extra")

from proxy_stack import running, serve_process
from servers import free_port
from stand_in import Provider

from middleware.formats.routes import providers

PASSWORD = "gw-Pa55word-never-shown"
TOKEN = "recall-token-0123456789"
HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
BODY = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


def with_password(url: str) -> str:
    return url.replace("http://", f"http://chat:{PASSWORD}@", 1)


def test_the_proxy_page_and_healthz_show_no_upstream_password(
    provider: tuple[Provider, str], tmp_path: Path
) -> None:
    _, upstream = provider
    secret = with_password(upstream)
    overrides = {
        "proxy.upstreams": {p.name: secret for p in providers()},
        "proxy.recall_token": TOKEN,
    }
    with running(provider, tmp_path, **overrides) as stack:
        answered = httpx.post(stack.url + "/v1/messages", json=BODY, headers=HEADERS, timeout=30)
        assert answered.status_code == 200  # the upstream is reached through it
        page = httpx.get(stack.url + "/ui/api/proxy", timeout=30)
        health = httpx.get(stack.url + "/healthz", timeout=30)
    shown = page.text + health.text
    assert PASSWORD not in shown and TOKEN not in shown
    assert page.json()["upstreams"]["anthropic"] == with_password(upstream).replace(PASSWORD, "***")
    set_keys = {k["key"]: k["value"] for k in page.json()["policy"]["set"]}
    assert set_keys["proxy.upstreams"]["openai"].endswith(f"chat:***@{upstream[7:]}")


@contextmanager
def closing_upstream() -> Iterator[int]:
    """A port whose server reads each request's head and closes the connection without a
    byte of answer."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    while b"\r\n\r\n" not in conn.recv(65536):
                        pass
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        server.close()
        thread.join(timeout=10)


@pytest.mark.slow
@pytest.mark.parametrize("upstream", ["unreachable", "closes"])
def test_serve_logs_and_answers_name_no_upstream_password(upstream: str, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with closing_upstream() as closing:
        port = closing if upstream == "closes" else free_port()
        base = f"http://chat:{PASSWORD}@127.0.0.1:{port}/gw"
        with serve_process(base, {"spill.root": str(tmp_path / "spill")}, log=log) as url:
            answer = httpx.post(url + "/v1/messages", json=BODY, headers=HEADERS, timeout=60)
            models = httpx.get(url + "/v1/models", headers=HEADERS, timeout=60)
    assert answer.status_code == 502 and models.status_code == 502
    said = answer.json()["error"]["message"]
    assert f"http://chat:***@127.0.0.1:{port}/gw" in said, said
    written = log.read_text("utf-8")
    assert f"anthropic -> http://chat:***@127.0.0.1:{port}/gw" in written  # the start-up line
    assert written.count(f"chat:***@127.0.0.1:{port}") >= 3, written
    assert PASSWORD not in written + answer.text + models.text + json.dumps(said)
