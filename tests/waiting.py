"""Waiting for what a server does after it answers (its access log, its metrics)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(condition: Callable[[], object], seconds: float = 30) -> bool:
    """Whether ``condition()`` came true within ``seconds`` (checked every 50 ms)."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(condition())
