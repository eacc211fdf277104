"""Work done once and reused: derived data of results and parsed messages, in one LRU with
a size budget (the policy's ``cache`` section)."""

from middleware.cache.lru import CacheStats, DerivedCache, Identity
from middleware.cache.settings import CacheSettings

__all__ = ["CacheSettings", "CacheStats", "DerivedCache", "Identity"]
