"""Step 1, pairing repair: the built-in plugin (its hook is in :mod:`.step`)."""

from __future__ import annotations

from middleware.steps.pairing.step import repair_pairing

__all__ = ["repair_pairing"]
