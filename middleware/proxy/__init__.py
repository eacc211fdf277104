"""``chatcli-mw serve``: an HTTP proxy that runs the pipeline on every request an agent
sends to its model provider, so agents nobody can edit (Claude Code, Codex CLI, opencode,
apps on the official SDKs) get it by pointing their base URL at it.

Needs the ``[proxy]`` extra (Starlette, uvicorn, httpx, prometheus-client); import
:mod:`middleware.proxy.app` only where that is installed.
"""
