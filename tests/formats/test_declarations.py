"""Every wire format answers every question the steps, the proxy and ``wrap()`` ask of
it (issue 29, item 1): a new format that forgets one fails here, not in a request."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any, get_args

import pytest

from middleware.formats import CODECS
from middleware.formats.base import Codec
from middleware.formats.declarations import ErrorKind, Provider, ResultPlacement, ToolSpec
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
    # What in a message is its own, and where its answers report their usage: its own
    # answers, not the base class's none.
    assert codec.history_key
    for question in ("signals", "usage_counts", "event_usage"):
        assert getattr(type(codec), question) is not getattr(Codec, question), question
    # A tool an integration offers reads back as declared.
    spec = ToolSpec("recall", "Read lines back.", {"type": "object", "properties": {}})
    assert codec.declared_tool_names(codec.tool_definition(spec)) == ["recall"]
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
    assert not provider.claims({}, {})  # a request that names no one is proxy.other_requests'
    assert provider.default_upstream.startswith("https://")


def test_each_provider_claims_its_own_requests() -> None:
    anthropic, openai = provider_named("anthropic"), provider_named("openai")
    assert anthropic.claims({"x-api-key": "k"}, {})
    assert anthropic.claims({"user-agent": "claude-cli"}, {})
    assert openai.claims({"authorization": "Bearer sk"}, {})
    assert not anthropic.claims({"authorization": "Bearer sk"}, {})
    with pytest.raises(KeyError):
        provider_named("nobody")


def test_a_new_format_is_one_new_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module in the wire package that defines ``CODEC`` is a format: nothing else to
    register. One that defines something else, or a name taken, is refused by name."""
    from middleware.formats import registry, wire

    (tmp_path / "zz_extra.py").write_text(textwrap.dedent("""
        from middleware.formats.wire.openai import OpenAIChatCodec

        class ExtraCodec(OpenAIChatCodec):
            name = "zz-extra"

        CODEC = ExtraCodec()
    """))  # fmt: skip
    monkeypatch.setattr(wire, "__path__", [*wire.__path__, str(tmp_path)])
    added = [f"middleware.formats.wire.{name}" for name in ("zz_extra", "zz_bad", "zz_twice")]
    try:
        _discover_new_modules(registry, tmp_path)
    finally:
        for name in added:
            sys.modules.pop(name, None)


def _discover_new_modules(registry: Any, tmp_path: Path) -> None:
    found = registry._discover()
    assert list(found)[-1] == "zz-extra" and set(CODECS) < set(found)
    (tmp_path / "zz_bad.py").write_text("CODEC = 'not a codec'\n")
    with pytest.raises(TypeError, match=r"zz_bad\.CODEC is not a Codec"):
        registry._discover()
    (tmp_path / "zz_bad.py").unlink()
    (tmp_path / "zz_twice.py").write_text(
        "from middleware.formats.wire.openai import OpenAIChatCodec\nCODEC = OpenAIChatCodec()\n"
    )
    with pytest.raises(TypeError, match="two wire formats are named 'openai'"):
        registry._discover()
