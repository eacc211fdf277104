"""The stores every records test runs against: SQLite in memory and in a file, and a
PostgreSQL database of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from middleware.records.store import MEMORY, RecordStore


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return MEMORY
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'records.sqlite'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def store(store_url: str) -> Iterator[RecordStore]:
    opened = RecordStore.open(store_url)
    yield opened
    opened.close()
