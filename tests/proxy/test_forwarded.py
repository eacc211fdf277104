"""Who the client is, behind proxies or not (issue 43, item 2): a real ``chatcli-mw serve``
started with ``FORWARDED_ALLOW_IPS='*'`` in its environment, which made uvicorn believe any
client's ``X-Forwarded-For``: a client beyond loopback that said ``X-Forwarded-For:
127.0.0.1`` opened the console and read the sessions. Now those headers are believed only
from the proxies ``proxy.trusted_proxies`` names, and a request that carries one from any
other peer is no loopback client."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

pytest.importorskip("starlette", reason="the proxy tests need the [proxy] extra")

from proxy_stack import serve_process
from servers import outside_address, serving
from stand_in import Provider

import middleware.proxy.settings  # noqa: F401 - registers the proxy's checks
from middleware.errors import PolicyError
from middleware.policy import load_policy

ANYONE = {"FORWARDED_ALLOW_IPS": "*"}
#: What a client says to pass for one on loopback, header by header.
CLAIMS = [
    {"x-forwarded-for": "127.0.0.1"},
    {"x-forwarded-for": "::1"},
    {"forwarded": "for=127.0.0.1"},
    {"forwarded": 'for="[::1]:4711";proto=http'},
    {"x-real-ip": "127.0.0.1"},
]


def status(
    url: str, headers: dict[str, str] | list[tuple[str, str]], path: str = "/ui/api/sessions"
) -> int:
    return httpx.get(url + path, headers=headers, timeout=30).status_code


@pytest.mark.slow  # a serve process starts in seconds: `-m "not slow"` leaves it out
def test_a_client_beyond_loopback_cannot_say_it_is_on_loopback(tmp_path: Path) -> None:
    outside = outside_address()
    with (
        serving(Provider().app()) as upstream,
        serve_process(upstream, {"spill.root": str(tmp_path)}, host="0.0.0.0", env=ANYONE) as url,
    ):
        beyond = url.replace("127.0.0.1", outside)
        assert status(beyond, {}) == 403  # beyond loopback: no console without the token
        for claim in CLAIMS:
            assert status(beyond, claim) == 403, claim
            assert status(beyond, claim, "/recall/s/out-0000000000000000.txt") == 403, claim
        # A client on loopback is one, unless it says it forwards another: a local proxy
        # the policy does not trust (nginx in front of the console, open to the network).
        assert status(url, {}) == 200
        for forwarded in ({"x-forwarded-for": "203.0.113.9"}, *CLAIMS):
            assert status(url, forwarded) == 403, forwarded
        # The providers' routes are not the console's: relayed whatever the headers say.
        models = httpx.get(beyond + "/v1/models", headers=CLAIMS[0], timeout=30)
        assert models.status_code == 200


@pytest.mark.slow
def test_a_trusted_proxy_says_which_client_it_forwards(tmp_path: Path) -> None:
    overrides = {"spill.root": str(tmp_path), "proxy.trusted_proxies": ["127.0.0.0/8"]}
    with (
        serving(Provider().app()) as upstream,
        serve_process(upstream, overrides, env=ANYONE) as url,
    ):
        assert status(url, {}) == 200  # no header: the peer itself, on loopback
        for claim in CLAIMS:  # an SSH tunnel into the trusted proxy: on loopback
            assert status(url, claim) == 200, claim
        for remote in (
            {"x-forwarded-for": "203.0.113.9"},
            {"x-forwarded-for": "127.0.0.1, 203.0.113.9"},  # the client wrote the first
            [("x-forwarded-for", "127.0.0.1"), ("x-forwarded-for", "203.0.113.9")],
            {"forwarded": "for=203.0.113.9"},
            {"forwarded": "for=unknown"},
            {"x-forwarded-for": "127.0.0.1", "forwarded": "for=203.0.113.9"},
            {"x-real-ip": "203.0.113.9", "x-forwarded-for": "127.0.0.1"},
            {"x-forwarded-for": "not-an-address"},
        ):
            assert status(url, remote) == 403, remote


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("proxy.trusted_proxies", ["10.0.0.0/8", "nginx.internal"], "'nginx.internal' is no IP"),
        ("proxy.trusted_proxies", ["10.0.0.300"], "is no IP address or network"),
        ("proxy.allowed_hosts", ["*"], "does not match"),
        ("proxy.allowed_hosts", ["evil.example/ui"], "does not match"),
        ("proxy.allowed_hosts", ["a.*.example"], "does not match"),
    ],
)
def test_the_policy_refuses_what_names_no_address_or_host(
    key: str, value: list[str], said: str
) -> None:
    with pytest.raises(PolicyError, match=re.escape(said)):
        load_policy(None, env={}, dotenv_path=False, overrides={key: value})
