"""What the tests of the proxy's ledger share: a clock the test moves, an agent's long
tool output, and the sum of the usage the stand-in's prompt cache reported."""

from __future__ import annotations

from prompt_cache import PromptCache

from middleware.ledger import Usage, read_usage


class Clock:
    """The stand-in's clock, moved by the test (the cache's 5 minutes pass at once)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def output(turn: int) -> str:
    """A command's output: long, varied, with the names a model would come back for."""
    lines = [
        f"src/module_{turn}_{n}.py:{n}: def handler_{turn}_{n}(request): value = {n * 7}"
        for n in range(900)
    ]
    return "\n".join(lines)


def reported(cache: PromptCache, fmt: str) -> Usage:
    """Every usage the stand-in reported in wire format ``fmt``, added up."""
    total = Usage()
    for kind, usage in cache.reported:
        if kind == fmt:
            read = read_usage(fmt, usage)
            assert read is not None
            total += read
    return total
