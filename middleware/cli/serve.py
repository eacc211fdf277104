"""``chatcli-mw serve``: run the HTTP proxy (needs the ``[proxy]`` extra)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from middleware.cli.common import add_command
from middleware.errors import MissingExtraError, PolicyError
from middleware.policy.secrets import redact_urls

if TYPE_CHECKING:
    from middleware.cli.common import Subcommands

#: Command-line options and the ``proxy`` keys they set (they win over the policy).
OPTIONS = {
    "host": "proxy.host",
    "port": "proxy.port",
    "anthropic_upstream": "proxy.upstreams.anthropic",
    "openai_upstream": "proxy.upstreams.openai",
    "policies_dir": "proxy.policies_dir",
}


def add_serve(commands: Subcommands) -> None:
    serve = add_command(
        commands,
        "serve",
        summary="run the HTTP proxy that cleans every request an agent sends",
        description="Listen for model requests (Anthropic Messages, OpenAI Chat Completions "
        "and Responses, Gemini generateContent), run the pipeline on each one's history and "
        "forward it to the provider; every other request to the providers' APIs (/v1/..., "
        "/v1beta/...) is forwarded untouched, any other path answered 404. Point the agent "
        "at it with its base-URL setting (ANTHROPIC_BASE_URL, OPENAI_BASE_URL, "
        "GOOGLE_GEMINI_BASE_URL). The proxy section of the "
        "policy (docs/policy.md) sets the rest; the policy is hot-reloaded.",
        examples=[
            "chatcli-mw serve      # then: ANTHROPIC_BASE_URL=http://127.0.0.1:8787 claude",
            "chatcli-mw serve --policy preset:claude-code --port 9000",
            "chatcli-mw serve --openai-upstream https://openrouter.ai/api --policies-dir /etc/mw",
        ],
    )
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="TCP port to listen on (default 8787)")
    serve.add_argument(
        "--policy", help="policy file or preset:NAME (default: $CHATCLI_POLICY, else embedded)"
    )
    serve.add_argument(
        "--anthropic-upstream",
        metavar="URL",
        help="where Anthropic requests go (default https://api.anthropic.com)",
    )
    serve.add_argument(
        "--openai-upstream",
        metavar="URL",
        help="where OpenAI requests go (default https://api.openai.com)",
    )
    serve.add_argument(
        "--upstream",
        metavar="PROVIDER=URL",
        action="append",
        default=[],
        help="where one provider's requests go (repeatable): gemini=https://gateway/google",
    )
    serve.add_argument(
        "--policies-dir",
        metavar="FOLDER",
        help="folder of NAME.yaml policies that /policy/NAME/... selects",
    )
    serve.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    try:
        from middleware.formats.routes import providers  # noqa: PLC0415 - with the others
        from middleware.proxy.build import build_proxy  # noqa: PLC0415 - needs the extra
        from middleware.proxy.listening import serve  # noqa: PLC0415 - likewise (uvicorn)
    except ImportError as exc:
        raise MissingExtraError("proxy", "starlette>=0.37", "chatcli-mw serve") from exc
    overrides: dict[str, Any] = {
        key: getattr(args, option)
        for option, key in OPTIONS.items()
        if getattr(args, option) is not None
    }
    for given in args.upstream:
        name, sep, url = given.partition("=")
        if not sep or not name or not url:
            raise PolicyError(f"--upstream takes PROVIDER=URL, got {redact_urls(given)!r}")
        overrides[f"proxy.upstreams.{name}"] = url
    if args.policies_dir is not None:
        overrides["proxy.policies_dir"] = str(Path(args.policies_dir).absolute())
    proxy, app = build_proxy(args.policy, overrides)
    settings = proxy.settings
    _configure_logging()
    _warn_if_exposed(settings)
    logging.getLogger(__name__).info(
        "chatcli-mw proxy on http://%s:%d (%s), policy %s",
        settings.host,
        settings.port,
        ", ".join(f"{p.name} -> {redact_urls(settings.upstream(p))}" for p in providers()),
        proxy.catalog.default.policy.name,
    )
    serve(app, settings, log_level="warning", access_log=False, timeout_graceful_shutdown=30)
    return 0


def _warn_if_exposed(settings: Any) -> None:
    """Say what anyone who reaches the port may do, when it is not on loopback only."""
    import ipaddress  # noqa: PLC0415

    try:
        loopback = ipaddress.ip_address(settings.host).is_loopback
    except ValueError:
        loopback = settings.host == "localhost"
    if loopback:
        return
    log = logging.getLogger(__name__)
    if settings.status_token is None:
        log.warning("listening on %s: /healthz and /metrics answer anyone who reaches the "
                    "port (set proxy.status_token to require a token)", settings.host)  # fmt: skip
    if settings.recall_token is None:
        log.warning(
            "listening on %s: spilled outputs (/recall) and session ends (DELETE) "
            "are open to loopback only; set proxy.recall_token for other machines",
            settings.host,
        )


def _configure_logging() -> None:
    """Our lines on stderr: the access log as JSON lines, the rest with their level."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.INFO)
    # The HTTP client logs every upstream URL at INFO, its query too: Gemini clients put
    # their API key there. The access log says what each request did, without either.
    for noisy in ("httpx", "httpcore", "httpx2", "httpcore2"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    access = logging.getLogger("middleware.proxy.access")
    plain = logging.StreamHandler(sys.stderr)
    plain.setFormatter(logging.Formatter("%(message)s"))
    access.addHandler(plain)
    access.propagate = False
