"""Which requests carry a history, and in which format: the proxy's paths and the path
endings of an SDK client's requests, as each codec declares them (:attr:`.Codec.proxy_routes`,
:attr:`.Codec.client_routes`). The proxy and :func:`middleware.wrap` both ask here."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

from middleware.formats.base import Codec
from middleware.formats.declarations import Provider
from middleware.formats.registry import CODECS


class Routed(NamedTuple):
    """The format a request's body is in, and whether its answer is billed."""

    codec: Codec
    billed: bool


def proxy_route(method: str, path: str) -> Routed | None:
    """The format of a request to the proxy's own ``path``, or ``None`` (not a model
    request: forwarded as it is)."""
    return _proxy_paths().get(path) if method == "POST" else None


def client_route(method: str, path: str) -> Routed | None:
    """The format of a request an SDK client sends to ``path``, found by the path's
    ending (a provider's own, a cloud's, a gateway's prefix before it), or ``None``."""
    if method != "POST":
        return None
    return next((routed for ending, routed in _client_endings() if path.endswith(ending)), None)


@cache
def _proxy_paths() -> dict[str, Routed]:
    return {
        route.path: Routed(codec, route.billed)
        for codec in CODECS.values()
        for route in codec.proxy_routes
    }


@cache
def _client_endings() -> tuple[tuple[str, Routed], ...]:
    """Longest ending first: ``/messages/count_tokens`` before ``/messages``."""
    endings = [
        (route.path, Routed(codec, route.billed))
        for codec in CODECS.values()
        for route in codec.client_routes
    ]
    return tuple(sorted(endings, key=lambda item: -len(item[0])))


def providers() -> tuple[Provider, ...]:
    """Every provider a format belongs to, in the order of the formats."""
    return tuple(dict.fromkeys(codec.provider for codec in CODECS.values()))


def provider_named(name: str) -> Provider:
    """The provider called ``name`` (``proxy.other_requests`` names one).

    :raises KeyError: no format belongs to it.
    """
    for provider in providers():
        if provider.name == name:
            return provider
    raise KeyError(name)
