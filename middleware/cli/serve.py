"""``chatcli-mw serve``: run the HTTP proxy (needs the ``[proxy]`` extra)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from middleware.cli.common import add_command
from middleware.errors import MiddlewareError, MissingExtraError, PolicyError
from middleware.logs import configure, set_level
from middleware.policy import Override
from middleware.policy.secrets import redact_urls
from middleware.policy.settings import bind

if TYPE_CHECKING:
    from middleware.cli.common import Subcommands
    from middleware.policy.source import PolicySource

#: Command-line options and the ``proxy`` keys they set (they win over the policy).
OPTIONS = {
    "host": "proxy.host",
    "port": "proxy.port",
    "anthropic_upstream": "proxy.upstreams.anthropic",
    "openai_upstream": "proxy.upstreams.openai",
    "policies_dir": "proxy.policies_dir",
    "log_format": "proxy.log.format",
    "log_level": "proxy.log.level",
}
#: Loggers that say only warnings and errors, whatever proxy.log.level says: uvicorn's info
#: lines repeat ours, and the HTTP client logs every upstream URL with its query (Gemini
#: clients put their API key there); the access log says what each request did, without
#: either.
QUIET = ("uvicorn", "httpx", "httpcore", "httpx2", "httpcore2")
#: The proxy's access log: one line per request, switched by proxy.access_log, not by level.
ACCESS_LOGGER = "middleware.proxy.access"


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
        "--observe",
        action="store_true",
        help="forward every request as it came and show what cleaning would have saved "
        "(proxy.mode: observe; set proxy.mode in the policy to switch by reloading it)",
    )
    serve.add_argument(
        "--policies-dir",
        metavar="FOLDER",
        help="folder of NAME.yaml policies that /policy/NAME/... selects",
    )
    serve.add_argument(
        "--log-format",
        metavar="FORMAT",
        help="text, or json: every line on stderr one JSON object (proxy.log.format)",
    )
    serve.add_argument(
        "--log-level",
        metavar="LEVEL",
        help="the lowest level logged: debug, info, warning or error (proxy.log.level)",
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
        key: Override(getattr(args, option), _by_option(option))
        for option, key in OPTIONS.items()
        if getattr(args, option) is not None
    }
    for given in args.upstream:
        name, sep, url = given.partition("=")
        if not sep or not name or not url:
            raise PolicyError(f"--upstream takes PROVIDER=URL, got {redact_urls(given)!r}")
        overrides[f"proxy.upstreams.{name}"] = Override(url, _by_option("upstream"))
    if args.observe:
        overrides["proxy.mode"] = Override("observe", _by_option("observe"))
    if args.policies_dir is not None:
        folder = str(Path(args.policies_dir).absolute())
        overrides["proxy.policies_dir"] = Override(folder, _by_option("policies_dir"))
    proxy, app = build_proxy(args.policy, overrides)
    settings = proxy.settings
    style = _configure_logging(proxy.catalog.default)
    _warn_if_exposed(settings)
    log = logging.getLogger(__name__)
    log.info(
        "chatcli-mw proxy on http://%s:%d (%s), policy %s",
        settings.host,
        settings.port,
        ", ".join(f"{p.name} -> {redact_urls(settings.upstream(p))}" for p in providers()),
        proxy.catalog.default.policy.name,
    )
    try:  # uvicorn's loggers keep ours: no log_config of its own, no level of its own
        serve(app, settings, log_config=None, access_log=False, timeout_graceful_shutdown=30)
    except (MiddlewareError, OSError) as exc:
        if style != "json":
            raise  # the command line's usual one line
        log.critical("%s", exc)
        return 2
    return 0


def _by_option(option: str) -> str:
    """Who set a key an option sets, as the policy's origins say it (the console's "set
    by", an error's "(set by ...)")."""
    return "command line --" + option.replace("_", "-")


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


def _configure_logging(source: PolicySource) -> str:
    """Every log line on stderr as ``proxy.log`` says, its level following the policy's
    reloads; the format, which is fixed."""
    from middleware.proxy.settings import LogSettings  # noqa: PLC0415 - with the proxy's

    chosen = bind(source.policy, LogSettings)
    configure(chosen.format, chosen.level, quiet=QUIET)
    logging.getLogger(ACCESS_LOGGER).setLevel(logging.INFO)
    source.follow(lambda policy: set_level(bind(policy, LogSettings).level, QUIET))
    return chosen.format
