"""The ``cache`` section: how much memory reused work may hold."""

from __future__ import annotations

from dataclasses import dataclass

from middleware.policy.settings import section


@section("cache")
@dataclass(frozen=True)
class CacheSettings:
    #: Bytes the cache of derived data and parsed messages may hold (an estimate of the
    #: text it keeps); 0 switches caching off.
    max_bytes: int
    #: Largest single message (bytes of its exact copy) kept for reuse; bigger ones are
    #: parsed again on every request, which costs little next to their size.
    max_message_bytes: int
