"""The ``plugins`` section: how the host runs third-party hook implementations."""

from __future__ import annotations

from dataclasses import dataclass

from middleware.policy import Policy
from middleware.policy.schema import default_of
from middleware.policy.settings import bind, section

#: The key of the time limit, named in the problems a slow implementation causes.
TIME_LIMIT_KEY = "plugins.time_limit_seconds"


@section("plugins")
@dataclass(frozen=True)
class PluginSettings:
    #: Seconds one call of a third-party implementation may take; ``None``: no limit.
    time_limit_seconds: float | None


def time_limit(policy: Policy | None) -> float | None:
    """The time limit under ``policy``; the schema's default when there is no policy (a
    host used outside a pipeline)."""
    if policy is None:
        value: float | None = default_of(TIME_LIMIT_KEY)
        return value
    return bind(policy, PluginSettings).time_limit_seconds
