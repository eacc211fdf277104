"""Step 2, budget enforcement: the built-in plugin (its hooks are in :mod:`.step`: the step,
``admit_outputs``, the same step at dispatch time, and ``result_cap``, the cap a tool's
result gets then)."""

from __future__ import annotations

from middleware.steps.budget.step import admit_outputs, enforce_budget, result_cap

__all__ = ["admit_outputs", "enforce_budget", "result_cap"]
