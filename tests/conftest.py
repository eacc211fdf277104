"""Fixtures every test folder may use: an S3-compatible server on loopback, started once
for the run by the first test that asks for it, and an empty bucket in it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from object_store import S3Server, s3_server


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    with s3_server() as server:
        yield server


@pytest.fixture
def bucket(s3: S3Server) -> str:
    return s3.bucket()
