"""The origin of the proxy's own routes: what a web page in the user's browser may make the
proxy do, since it runs on the machine whose loopback address opens the console.

* **DNS rebinding.** A page at ``evil.example``, its name rebound to 127.0.0.1, sends
  loopback requests the browser takes for its own origin: they read spilled outputs
  through ``/recall``, listed the sessions and ended one. Every request the proxy answers
  itself (``/ui``, ``/sessions``, ``/recall``, ``/healthz``, ``/metrics``, a path it does
  not relay) is answered only when ``Host`` names the proxy: an IP address (it cannot be
  rebound), ``localhost``, ``proxy.host``, the host of ``recall.url`` or a name of
  ``proxy.allowed_hosts``; else 421, logged once per interval. The providers' API paths
  are relayed whatever ``Host`` says: agents in containers reach the proxy by other names.
* **Cross-site requests.** A preflight of an own route is answered here, granting
  nothing (never relayed upstream, where a permissive gateway might grant it); a request
  that changes something (any method but GET, HEAD and OPTIONS) with a foreign ``Origin``
  or a ``Sec-Fetch-Site`` of another site is refused with 403. A model request whose body
  is not declared JSON (what a page can POST across sites without asking first) is
  refused before any step runs (:func:`declares_json`).
* **Same-origin content.** Only the providers' API paths are relayed (the app answers the
  others 404); an answer relayed from them that a browser could render (not JSON, not an
  event stream) is sandboxed; the proxy's own answers forbid inline script, framing and
  sniffing.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Callable
from typing import Any, NamedTuple
from urllib.parse import quote, unquote, urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from middleware.formats.routes import api_path
from middleware.logs import IntervalLog
from middleware.policy import Policy
from middleware.policy.settings import bind
from middleware.proxy.settings import ProxySettings

logger = logging.getLogger(__name__)

POLICY_PREFIX = "/policy/"
_SLASHES = re.compile(r"/{2,}")
#: The methods that change nothing on the proxy's own routes.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: The console's page and its files run only the proxy's own script and style, fetch only
#: from it, and are framed by nothing.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
#: Headers of every answer the proxy gives itself.
OWN_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)
#: Headers added to a relayed answer a browser could render: a document served under the
#: proxy's origin, sandboxed, runs no script and reads nothing of that origin.
SANDBOXED = ((b"content-security-policy", b"sandbox"), (b"x-content-type-options", b"nosniff"))
#: JSON's media types, and those of the providers' APIs' answers, relayed as they came.
_JSON = re.compile(r"application/(json|[\w.+-]+\+json)")
_API_MEDIA = re.compile(rf"{_JSON.pattern}|application/x-ndjson|text/event-stream")


class RequestPath(NamedTuple):
    """A request's path as the proxy routes it: the policy ``/policy/NAME/`` selects, the
    rest as the client sent it (percent-encoded, repeated slashes made one), decoded."""

    policy: str | None
    raw: str
    path: str

    @property
    def relayed(self) -> bool:
        """Whether it is a provider's API path, which the proxy relays upstream: as it
        was sent (what the upstream reads) and decoded (what the proxy routes)."""
        return api_path(self.raw) and api_path(self.path)


def request_path(scope: Scope) -> RequestPath:
    """``ANTHROPIC_BASE_URL=http://host:8787/`` makes SDKs send ``//v1/messages``: the
    same route. The path is forwarded as it came (still percent-encoded), routed decoded."""
    raw = scope.get("raw_path")
    sent = raw.decode("latin-1") if isinstance(raw, bytes) else quote(scope["path"], safe="/")
    sent = _SLASHES.sub("/", sent)
    policy = None
    if sent.startswith(POLICY_PREFIX):
        policy, _, rest = sent[len(POLICY_PREFIX) :].partition("/")
        sent = "/" + rest
    return RequestPath(policy, sent, unquote(sent))


def declares_json(content_type: str) -> bool:
    """Whether a ``Content-Type`` declares JSON: what the providers require of a model
    request, and what a page cannot send across sites without a preflight."""
    media = content_type.partition(";")[0].strip().lower()
    return _JSON.fullmatch(media) is not None


class Names:
    """The names under which the proxy's own routes answer (see the module's docstring)."""

    def __init__(self, policy: Policy) -> None:
        settings = bind(policy, ProxySettings)
        recall = urlsplit(policy.get("recall.url") or "").hostname or ""
        given = [*settings.allowed_hosts, settings.host, recall]
        self.exact = frozenset(name.lower() for name in given if name and not name.startswith("*."))
        self.suffixes = tuple(name[1:].lower() for name in given if name.startswith("*."))

    def include(self, host: str) -> bool:
        """Whether a ``Host`` header's value names the proxy."""
        hostname = _hostname(host)
        if hostname is None:
            return False
        try:
            ipaddress.ip_address(hostname)
            return True
        except ValueError:
            pass
        hostname = hostname.lower()
        return (
            hostname == "localhost"
            or hostname in self.exact
            or any(hostname.endswith(s) and len(hostname) > len(s) for s in self.suffixes)
        )


def _hostname(host: str) -> str | None:
    """The host of a ``Host`` header (its port aside), ``None`` if it is not of the form
    ``name``, ``name:port``, ``[v6]`` or ``[v6]:port``."""
    if host.startswith("["):
        inside, bracket, port = host[1:].partition("]")
        if not bracket or (port and not (port[0] == ":" and port[1:].isdigit())):
            return None
        return inside
    name, colon, port = host.partition(":")
    if colon and not port.isdigit():
        return None
    return name or None


class OwnOrigin:
    """ASGI middleware holding the proxy's own routes to their own origin."""

    def __init__(self, app: ASGIApp, policy: Callable[[], Policy]) -> None:
        self.app = app
        self.policy = policy
        self.log = IntervalLog(logger)
        self._names: tuple[Policy, Names] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if request_path(scope).relayed:
            await self.app(scope, receive, _adding(send, SANDBOXED, _renderable))
            return
        headers = Headers(scope=scope)
        refused = self._refused(scope, headers)
        if refused is not None:
            status, text = refused
            await _answer(send, status, text)
            return
        await self.app(scope, receive, _adding(send, OWN_HEADERS, lambda _: True))

    def _refused(self, scope: Scope, headers: Headers) -> tuple[int, str] | None:
        hosts = headers.getlist("host")
        if len(hosts) != 1 or not self.names().include(hosts[0]):
            shown = hosts[0][:100] if len(hosts) == 1 else f"{len(hosts)} Host headers"
            self.log(logging.WARNING, "host", "refused %s %s with Host %r: the proxy's own "
                     "routes answer only an IP address, localhost or a name in "
                     "proxy.allowed_hosts (a page whose name was rebound to this address "
                     "sends its own)", scope["method"], scope["path"][:200], shown)  # fmt: skip
            return 421, (
                f"chatcli-middleware answers its own routes only under its own names: "
                f"an IP address, localhost, or a name listed in proxy.allowed_hosts; this "
                f"request named {shown!r}. If that is a name of this proxy, add it to "
                f"proxy.allowed_hosts.\n"
            )
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            return 403, "the proxy's own routes grant no cross-origin access\n"
        if scope["method"] not in SAFE_METHODS and _cross_site(headers, hosts[0]):
            return 403, (
                "the proxy's own routes refuse a request that changes something from "
                "another site (its Origin or Sec-Fetch-Site says cross-site); send it "
                "without a browser, or from the console's own page\n"
            )
        return None

    def names(self) -> Names:
        """The proxy's names under its policy as it was last reloaded."""
        policy = self.policy()
        if self._names is None or self._names[0] is not policy:
            self._names = (policy, Names(policy))
        return self._names[1]


def _cross_site(headers: Headers, host: str) -> bool:
    """Whether a request comes from a page of another origin than the proxy's own."""
    if headers.get("sec-fetch-site", "").lower() in ("cross-site", "same-site"):
        return True
    origins = headers.getlist("origin")
    if not origins:
        return False  # not sent by a browser's page (a tool, an agent's platform)
    own = {f"http://{host}".lower(), f"https://{host}".lower()}
    return len(origins) != 1 or origins[0].lower() not in own


def _renderable(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a browser could render an answer with these headers as a document: any
    answer that is not JSON or an event stream."""
    types = [v for k, v in headers if k.lower() == b"content-type"]
    media = types[0].decode("latin-1").partition(";")[0].strip().lower() if types else ""
    return _API_MEDIA.fullmatch(media) is None


def _adding(
    send: Send, added: tuple[tuple[bytes, bytes], ...], when: Callable[[list[Any]], bool]
) -> Send:
    """``send``, adding ``added`` to the answer's headers when ``when(headers)``."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            if when(headers):
                message = {**message, "headers": headers + list(added)}
        await send(message)

    return sending


async def _answer(send: Send, status: int, text: str) -> None:
    body = text.encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()), *OWN_HEADERS],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})
