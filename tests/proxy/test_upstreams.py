"""Where each provider's requests go: ``proxy.upstreams`` by provider name, the older
per-provider keys, each provider's own API, and names that exist checked at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from middleware.cli.app import build_parser
from middleware.errors import PolicyError
from middleware.formats.routes import provider_named, providers
from middleware.policy import Override, load_policy, validate_policy_file
from middleware.policy.settings import bind
from middleware.proxy.settings import ProxySettings


def settings(**overrides: object) -> ProxySettings:
    return bind(load_policy(None, env={}, dotenv_path=False, overrides=overrides), ProxySettings)


def test_every_provider_goes_to_its_own_api_unless_told_otherwise() -> None:
    bound = settings()
    for provider in providers():
        assert bound.upstream(provider) == provider.default_upstream
    anthropic, openai = provider_named("anthropic"), provider_named("openai")
    assert bound.upstream(anthropic) == "https://api.anthropic.com"
    told = settings(**{"proxy.upstreams": {"openai": "http://127.0.0.1:8000"}})
    assert told.upstream(openai) == "http://127.0.0.1:8000"
    assert told.upstream(anthropic) == "https://api.anthropic.com"


def test_the_older_keys_still_work_and_upstreams_wins_over_them() -> None:
    anthropic = provider_named("anthropic")
    old = settings(**{"proxy.anthropic_upstream": "http://old"})
    assert old.upstream(anthropic) == "http://old"
    both = settings(
        **{"proxy.anthropic_upstream": "http://old", "proxy.upstreams.anthropic": "http://new"}
    )
    assert both.upstream(anthropic) == "http://new"


def test_an_environment_variable_sets_one_entry() -> None:
    environ = {"CHATCLI_PROXY__UPSTREAMS__OPENAI": "http://vllm:8000"}
    policy = load_policy(None, env=environ, dotenv_path=False)
    assert bind(policy, ProxySettings).upstream(provider_named("openai")) == "http://vllm:8000"


@pytest.mark.parametrize(
    ("key", "value"),
    [("proxy.upstreams", {"opnai": "http://x"}), ("proxy.other_requests", "antropic")],
)
def test_a_provider_name_that_no_format_belongs_to_is_refused(key: str, value: object) -> None:
    with pytest.raises(PolicyError) as caught:
        settings(**{key: value})
    message = str(caught.value)
    assert "expected one of: anthropic" in message and "set by override" in message


def test_validate_finds_a_provider_name_no_format_belongs_to(tmp_path: Path) -> None:
    """``chatcli-mw validate`` refuses what loading the policy refuses."""
    path = tmp_path / "proxy.yaml"
    path.write_text("version: 1\nproxy:\n  upstreams:\n    opnai: http://x\n", "utf-8")
    (error,) = validate_policy_file(path)
    assert error.path == "$.proxy.upstreams.opnai" and "expected one of: anthropic" in str(error)


def test_an_upstream_must_be_a_url() -> None:
    with pytest.raises(PolicyError, match="https"):
        settings(**{"proxy.upstreams.openai": "api.openai.com"})


def test_serve_takes_one_provider_upstream_per_option(monkeypatch: pytest.MonkeyPatch) -> None:
    from middleware.cli import serve

    seen: dict[str, object] = {}

    def build(policy: object, overrides: dict[str, object]) -> object:
        seen.update(overrides)
        raise SystemExit(0)

    monkeypatch.setattr("middleware.proxy.build.build_proxy", build)
    parser = build_parser()
    args = parser.parse_args(
        ["serve", "--upstream", "openai=http://a", "--anthropic-upstream", "http://b"]
    )
    with pytest.raises(SystemExit):
        serve.run_serve(args)
    assert seen == {
        "proxy.upstreams.openai": Override("http://a", "command line --upstream"),
        "proxy.upstreams.anthropic": Override("http://b", "command line --anthropic-upstream"),
    }
    with pytest.raises(PolicyError, match="PROVIDER=URL"):
        serve.run_serve(parser.parse_args(["serve", "--upstream", "openai"]))
