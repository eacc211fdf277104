"""Step 3, microcompaction: the built-in plugin (its step hook is in :mod:`.step`; what it
promises the budget step, ``compact_before_spill``, in :mod:`.before_spill`)."""

from __future__ import annotations

from middleware.steps.microcompact.before_spill import compact_before_spill
from middleware.steps.microcompact.step import microcompact

__all__ = ["compact_before_spill", "microcompact"]
