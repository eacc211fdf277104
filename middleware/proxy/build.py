"""Assemble a proxy from a policy: its sources, the plugin host, the app."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from middleware.cache import allocator
from middleware.plugin.host import PluginHost
from middleware.policy import Override
from middleware.policy.settings import bind
from middleware.policy.source import PolicySource
from middleware.proxy.app import Proxy, create_app
from middleware.proxy.policies import PolicyCatalog
from middleware.proxy.settings import ProxySettings
from middleware.spill import SpillSettings, open_root
from middleware.spill.stores import check_local_folder

#: Who set ``spill.keep``, as the console's "set by" says: the proxy itself, always.
KEEPS_SPILLS = "the proxy (the previews it sends name its spill files)"


def build_proxy(
    policy: str | Path | None,
    overrides: Mapping[str, Any] | None = None,
    *,
    host: PluginHost | None = None,
) -> tuple[Proxy, Starlette]:
    """The proxy serving ``policy`` (a file, ``preset:NAME``, or ``None`` for
    ``$CHATCLI_POLICY`` or the embedded default) and its ASGI app.

    The proxy keeps its sessions' spill files when they go idle (``spill.keep``): the
    previews the agent already holds name them. A spill store it cannot open (an object
    store without its extra, a URL fsspec does not know, a local folder that is a file or
    a FIFO) or a ledger file that is no regular file is an error here, not at the first
    request.
    """
    allocator.tune()  # before the worker threads start: fewer arenas of free memory
    layered = {"spill.keep": Override(True, KEEPS_SPILLS), **(overrides or {})}
    plugins = host if host is not None else PluginHost.create()
    default = PolicySource("default", policy, plugins, layered)
    spill = bind(default.policy, SpillSettings)
    open_root(spill)  # a store it cannot open, or a folder that is none: fail now
    check_local_folder(spill)
    settings = bind(default.policy, ProxySettings)
    folder = Path(settings.policies_dir) if settings.policies_dir is not None else None
    catalog = PolicyCatalog(default, folder, plugins, layered)
    proxy = Proxy(catalog, plugins)
    return proxy, create_app(proxy)
