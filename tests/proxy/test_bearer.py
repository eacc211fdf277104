"""The proxy's own routes take their token as a bearer credential whatever the case of
the scheme (RFC 7235: ``bearer tok`` is ``Bearer tok``), from a client beyond loopback,
over a real socket (issue 36, item 12)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("starlette", reason="the proxy tests need the [proxy] extra")

from servers import outside_address, serving

from middleware.proxy.build import build_proxy

STATUS, RECALL = "status-0123456789", "recall-0123456789"
#: Each route of the proxy's own, and the token it takes.
ROUTES = [
    ("GET", "/healthz", STATUS),
    ("GET", "/metrics", STATUS),
    ("GET", "/sessions", RECALL),
    ("GET", "/sessions/s1", RECALL),
    ("GET", "/recall/s1/out.txt", RECALL),
    ("DELETE", "/sessions/s1", RECALL),
    ("GET", "/ui/", RECALL),
    ("GET", "/ui/static/console.js", RECALL),
    ("GET", "/ui/api/sessions", RECALL),
    ("GET", "/ui/api/sessions/s1", RECALL),
    ("GET", "/ui/api/proxy", RECALL),
]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    host = outside_address()
    spill = tmp_path_factory.mktemp("bearer") / "spill"
    _, app = build_proxy(
        None,
        {
            "proxy.status_token": STATUS,
            "proxy.recall_token": RECALL,
            "spill.root": str(spill),
        },
    )
    with serving(app, host) as served:
        yield served


def status(url: str, method: str, path: str, authorization: str | None) -> int:
    headers = {} if authorization is None else {"authorization": authorization}
    return httpx.request(method, url + path, headers=headers, timeout=30).status_code


@pytest.mark.parametrize(("method", "path", "token"), ROUTES)
def test_the_bearer_scheme_is_taken_in_any_case(
    url: str, method: str, path: str, token: str, tmp_path: Path
) -> None:
    assert status(url, method, path, None) == 403  # beyond loopback, without the token
    accepted = [
        f"{scheme}{spaces}{token}"
        for scheme in ("Bearer", "bearer", "BEARER", "bEaReR")
        for spaces in (" ", "  ")  # RFC 7235: one space or more
    ]
    assert [c for c in accepted if status(url, method, path, c) == 403] == []
    other = STATUS if token == RECALL else RECALL
    for refused in (f"Bearer {other}", f"Basic {token}", f"Bearer{token}", f"bearer {token}x",
                    token, f"Bearer {token[:-1]}"):  # fmt: skip
        assert status(url, method, path, refused) == 403, refused
