"""Step 2, budget enforcement: the built-in plugin (its hooks are in :mod:`.step`: the step,
and ``result_cap``, the cap a tool's result gets at dispatch time)."""

from __future__ import annotations

from middleware.steps.budget.step import enforce_budget, result_cap

__all__ = ["enforce_budget", "result_cap"]
