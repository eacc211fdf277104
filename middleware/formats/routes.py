"""Which requests carry a history, and in which format: the proxy's paths and the path
endings of an SDK client's requests, as each codec declares them (:attr:`.Codec.proxy_routes`,
:attr:`.Codec.client_routes`). The proxy and :func:`middleware.wrap` both ask here."""

from __future__ import annotations

import re
from functools import cache
from typing import NamedTuple

from middleware.formats.base import Codec
from middleware.formats.declarations import Provider
from middleware.formats.registry import CODECS


class Routed(NamedTuple):
    """The format a request's body is in, whether its answer is billed, whether it is
    streamed by the path alone, the route's path as declared (``{model}`` and the like
    left as they are: what the proxy's metrics are labelled with, never a name a client
    chose), and whether its history is cleaned (else it goes as it came, only billed)."""

    codec: Codec
    billed: bool
    streamed: bool = False
    template: str = ""
    cleaned: bool = True


def proxy_route(method: str, path: str) -> Routed | None:
    """The format of a request to the proxy's own ``path``, or ``None`` (not a model
    request: forwarded as it is)."""
    if method != "POST":
        return None
    exact, templates = _proxy_paths()
    found = exact.get(path)
    if found is None:
        found = next((routed for pattern, routed in templates if pattern.fullmatch(path)), None)
    return found


def client_route(method: str, path: str) -> Routed | None:
    """The format of a request an SDK client sends to ``path``, found by the path's
    ending (a provider's own, a cloud's, a gateway's prefix before it), or ``None``."""
    if method != "POST":
        return None
    return next((routed for ending, routed in _client_endings() if path.endswith(ending)), None)


@cache
def _proxy_paths() -> tuple[dict[str, Routed], tuple[tuple[re.Pattern[str], Routed], ...]]:
    """The exact paths, and the paths with ``{name}`` segments as patterns."""
    exact: dict[str, Routed] = {}
    templates: list[tuple[re.Pattern[str], Routed]] = []
    for codec in CODECS.values():
        for route in codec.proxy_routes:
            routed = Routed(codec, route.billed, route.streamed, route.path, route.cleaned)
            if "{" in route.path:
                templates.append((path_pattern(route.path), routed))
            else:
                exact[route.path] = routed
    return exact, tuple(templates)


def path_pattern(template: str) -> re.Pattern[str]:
    """``template`` with each ``{name}`` matching one or more characters other than ``/``."""
    parts = re.split(r"\{[a-zA-Z_]+\}", template)
    return re.compile("[^/]+".join(re.escape(part) for part in parts))


@cache
def _client_endings() -> tuple[tuple[str, Routed], ...]:
    """Longest ending first: ``/messages/count_tokens`` before ``/messages``."""
    endings = [
        (route.path, Routed(codec, route.billed, route.streamed, route.path, route.cleaned))
        for codec in CODECS.values()
        for route in codec.client_routes
    ]
    return tuple(sorted(endings, key=lambda item: -len(item[0])))


def api_path(path: str) -> bool:
    """Whether ``path`` (decoded) is under a provider's API (:attr:`.Provider.api_prefixes`):
    what the proxy relays."""
    return path.startswith(_api_prefixes())


@cache
def _api_prefixes() -> tuple[str, ...]:
    return tuple(dict.fromkeys(prefix for p in providers() for prefix in p.api_prefixes))


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
