"""The policy layer: declarative settings, read from YAML, ``.env`` and the environment,
validated against the JSON Schema and frozen into one immutable :class:`Policy`."""

from __future__ import annotations

from middleware.policy.document import Override, Policy
from middleware.policy.loader import POLICY_ENV, load_policy, validate_policy_file

__all__ = ["POLICY_ENV", "Override", "Policy", "load_policy", "validate_policy_file"]
