"""Step 3, microcompaction: the built-in plugin (its hook is in :mod:`.step`)."""

from __future__ import annotations

from middleware.steps.microcompact.step import microcompact

__all__ = ["microcompact"]
