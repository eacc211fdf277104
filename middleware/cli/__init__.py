"""``chatcli-mw``, the command line."""

from __future__ import annotations

from middleware.cli.app import main

__all__ = ["main"]
