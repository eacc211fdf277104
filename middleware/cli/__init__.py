"""``chatcli-mw``, the command line."""

from __future__ import annotations

from middleware.cli.main import main

__all__ = ["main"]
