"""Every wire format answers every question the steps, the proxy and ``wrap()`` ask of
it (issue 29, item 1): a new format that forgets one fails here, not in a request."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from middleware.formats import CODECS
from middleware.formats.base import Codec, ErrorKind, Provider, ResultPlacement
from middleware.formats.routes import client_route, provider_named, providers, proxy_route

FORMATS = sorted(CODECS)


@pytest.mark.parametrize("name", FORMATS)
def test_every_format_declares_itself(name: str) -> None:
    codec = CODECS[name]
    assert codec.name == name
    assert isinstance(codec.provider, Provider) and codec.provider.name
    assert isinstance(codec.result_placement, ResultPlacement)
    assert codec.duplicate_ids_within in ("message", "turn")
    assert codec.generated_id_prefix
    if codec.call_id_pattern is not None:  # an id rule comes with the reason it gives
        assert codec.call_id_rule
        assert codec.accepts_call_id(codec.generated_id_prefix + "0123abcd")
    # Where its answers report their usage: its own reading, not the base class's none.
    for question in ("usage_counts", "event_usage"):
        assert getattr(type(codec), question) is not getattr(Codec, question), question
    assert codec.proxy_routes and all(r.path.startswith("/v") for r in codec.proxy_routes)
    assert codec.client_routes
    assert any(route.billed for route in codec.proxy_routes)
    # Every declared route leads back to this format.
    for route in codec.proxy_routes:
        found = proxy_route("POST", route.path)
        assert found is not None and found.codec is codec and found.billed == route.billed
        assert proxy_route("GET", route.path) is None
    for route in codec.client_routes:
        found = client_route("POST", "https://gateway.example/prefix" + route.path)
        assert found is not None and found.codec is codec and found.billed == route.billed


def test_no_two_formats_claim_one_route() -> None:
    paths = [r.path for codec in CODECS.values() for r in codec.proxy_routes]
    endings = [r.path for codec in CODECS.values() for r in codec.client_routes]
    assert len(paths) == len(set(paths)) and len(endings) == len(set(endings))


@pytest.mark.parametrize("provider", providers(), ids=lambda p: p.name)
def test_every_provider_answers_every_error_in_its_own_shape(provider: Provider) -> None:
    assert provider_named(provider.name) is provider
    for kind in get_args(ErrorKind):
        document = provider.error_document(kind, "what to change")
        assert "what to change" in json.dumps(document)
    assert not provider.claims({})  # a request that names no one is proxy.other_requests'


def test_each_provider_claims_its_own_requests() -> None:
    anthropic, openai = provider_named("anthropic"), provider_named("openai")
    assert anthropic.claims({"x-api-key": "k"}) and anthropic.claims({"user-agent": "claude-cli"})
    assert openai.claims({"authorization": "Bearer sk"}) and not anthropic.claims(
        {"authorization": "Bearer sk"}
    )
    with pytest.raises(KeyError):
        provider_named("nobody")
