"""Step 2, budget enforcement: the built-in plugin (its hook is in :mod:`.step`)."""

from __future__ import annotations

from middleware.steps.budget.step import enforce_budget

__all__ = ["enforce_budget"]
