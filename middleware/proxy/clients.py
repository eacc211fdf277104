"""Who a request to the proxy's own routes comes from: a client on this machine (loopback),
or one that carries the route's token.

The client is the address the connection came from. Behind a reverse proxy that the policy
trusts (``proxy.trusted_proxies``), it is the client that proxy says it forwards, in
``X-Forwarded-For``, ``Forwarded`` (RFC 7239) or ``X-Real-IP``: the last address before
the trusted ones, in every one of those headers the request carries. From any other peer
those headers are never believed, and a request carrying one is no loopback client: it
came through a proxy that is not trusted to say whom it forwards (a local nginx in front
of the console, open to the network). uvicorn's own reading of ``X-Forwarded-For`` is off
(:func:`middleware.proxy.listening.serve`): it believed ``FORWARDED_ALLOW_IPS`` from the
environment, where ``*`` let any client say it was 127.0.0.1 and open the console.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Sequence

from starlette.datastructures import Headers
from starlette.requests import Request

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: The headers in which a reverse proxy says whom it forwards.
FORWARDING = ("x-forwarded-for", "forwarded", "x-real-ip")


def allowed(request: Request, token: str | None, trusted: Sequence[Network]) -> bool:
    """Whether ``request`` comes from loopback or carries ``token`` as its bearer."""
    if token is not None and carries(request.headers.get("authorization", ""), token):
        return True
    return is_local(request.client.host if request.client else "", request.headers, trusted)


def is_local(peer_host: str, headers: Headers, trusted: Sequence[Network]) -> bool:
    """Whether the client behind the connection from ``peer_host`` is on loopback."""
    peer = address(peer_host)
    chains = forwarded_chains(headers)
    if not chains:
        return peer is not None and peer.is_loopback
    if peer is None or not within(peer, trusted):
        return False
    clients = [client_of(chain, trusted) for chain in chains]
    return all(client is not None and client.is_loopback for client in clients)


def forwarded_chains(headers: Headers) -> list[list[Address | None]]:
    """The addresses each forwarding header lists, first hop first (``None``: one that is
    no address, such as ``unknown`` or an obfuscated name)."""
    chains = []
    for name in FORWARDING:
        values = headers.getlist(name)
        if not values:
            continue
        items = [item for value in values for item in value.split(",")]
        if name == "forwarded":
            chains.append([address(_for_of(item)) for item in items])
        else:
            chains.append([address(item) for item in items])
    return chains


def client_of(chain: list[Address | None], trusted: Sequence[Network]) -> Address | None:
    """The client a chain of hops names: the last one that is not a trusted proxy."""
    for hop in reversed(chain):
        if hop is None or not within(hop, trusted):
            return hop
    return chain[0] if chain else None


def within(hop: Address, networks: Iterable[Network]) -> bool:
    return any(hop in network for network in networks)


def address(text: str) -> Address | None:
    """The IP address ``text`` names (``[::1]:8080``, ``10.0.0.1:443`` and quotes allowed),
    else ``None``."""
    text = text.strip().strip('"')
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _for_of(element: str) -> str:
    """The ``for=`` parameter of one element of a ``Forwarded`` header ("" if none)."""
    for pair in element.split(";"):
        key, _, value = pair.strip().partition("=")
        if key.lower() == "for":
            return value
    return ""


def carries(authorization: str, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``token`` as its bearer credentials:
    the scheme in any case, one space or more after it (RFC 7235); the header's bytes as
    they came, compared in a time that does not tell how much of the token they share."""
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(credentials.lstrip(" ").encode("latin-1"), token.encode("utf-8"))
