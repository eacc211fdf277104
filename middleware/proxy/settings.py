"""The ``proxy`` section: where the proxy listens, where it forwards, and how it fails."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from middleware.formats.declarations import Provider
from middleware.formats.routes import provider_named, providers
from middleware.policy.loader import register_check
from middleware.policy.settings import converted, section

#: The deprecated keys that named one provider's upstream each.
_LEGACY_UPSTREAMS = {"anthropic": "anthropic_upstream", "openai": "openai_upstream"}


@section("proxy")
@dataclass(frozen=True)
class ProxySettings:
    host: str
    port: int
    upstreams: Mapping[str, str]
    anthropic_upstream: str | None
    openai_upstream: str | None
    other_requests: str
    mode: str
    observe_seconds: float
    observe_bytes: int
    fail_open: bool
    max_body_bytes: int
    policies_dir: str | None
    recall_token: str | None
    status_token: str | None
    connect_timeout_seconds: float
    read_timeout_seconds: float
    upstream_idle_seconds: float
    max_connections: int
    client_connections: int
    header_timeout_seconds: float
    body_timeout_seconds: float
    cleaning_bytes: int
    cleaning_wait_seconds: float
    waiting_bytes: int
    access_log: bool
    allowed_hosts: tuple[str, ...] = converted(tuple)
    trusted_proxies: tuple[str, ...] = converted(tuple)

    def upstream(self, provider: Provider) -> str:
        """The base URL ``provider``'s requests go to: ``proxy.upstreams``, else the
        deprecated key of its own, else its API."""
        named = self.upstreams.get(provider.name)
        if named is None and provider.name in _LEGACY_UPSTREAMS:
            named = getattr(self, _LEGACY_UPSTREAMS[provider.name])
        return named if named is not None else provider.default_upstream

    @cached_property
    def trusted_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        """``proxy.trusted_proxies`` as networks (checked when the policy loads)."""
        return tuple(ipaddress.ip_network(text, strict=False) for text in self.trusted_proxies)

    @property
    def observing(self) -> bool:
        """Whether requests go as they came, the pipeline running beside them."""
        return self.mode == "observe"

    @property
    def other_provider(self) -> Provider:
        """The provider ``proxy.other_requests`` names (checked when the policy loads)."""
        return provider_named(self.other_requests)


@section("proxy.log")
@dataclass(frozen=True)
class LogSettings:
    """How ``chatcli-mw serve`` writes its log (the command configures it: library code
    only logs)."""

    format: str
    level: str


@register_check
def _provider_names(document: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``proxy.upstreams`` and ``proxy.other_requests`` name providers that exist."""
    proxy = document.get("proxy", {})
    known = [provider.name for provider in providers()]

    def unknown(name: str) -> str:
        return f"no wire format is for a provider {name!r}; expected one of: {', '.join(known)}"

    for name in proxy.get("upstreams", {}):
        if name not in known:
            yield f"proxy.upstreams.{name}", unknown(name)
    other = proxy.get("other_requests")
    if other is not None and other not in known:
        yield "proxy.other_requests", unknown(other)


@register_check
def _trusted_proxies(document: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``proxy.trusted_proxies`` are addresses or networks."""
    for index, text in enumerate(document.get("proxy", {}).get("trusted_proxies", [])):
        try:
            ipaddress.ip_network(text, strict=False)
        except ValueError:
            yield (f"proxy.trusted_proxies.{index}", f"{text!r} is no IP address or network "
                   "(such as 127.0.0.1, 10.0.0.0/8 or ::1)")  # fmt: skip
