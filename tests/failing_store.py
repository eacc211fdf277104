"""A spill store whose disk is full, and the plugin that provides it: what the tests of a
spill that fails share (the budget step keeps the output and says why; the vocabulary's
kinds include the failure)."""

from __future__ import annotations

from middleware.plugin.markers import hookimpl


class FailingStore:
    """A spill store whose disk is full."""

    def save(self, key: str, content: str, *, suffix: str = ".txt") -> str:
        raise OSError(28, "No space left on device")

    def load(self, location: str) -> str | None:
        return None

    def close(self) -> None:
        """Nothing to release."""


class ProvidesFailingStore:
    @hookimpl
    def spill_store(self) -> FailingStore:
        return FailingStore()
