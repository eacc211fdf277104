"""The ``spill`` section: where the full text of cut results is kept, and what happens
when it cannot be."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from middleware.policy.settings import section, setting


@section("spill")
@dataclass(frozen=True)
class SpillSettings:
    #: A local folder or an fsspec URL (``s3://bucket/prefix``); ``None``: :attr:`root`.
    url: str | None
    #: Options of the fsspec filesystem of a URL that is not local.
    storage_options: Mapping[str, Any]
    #: Seconds during which new spills fail at once after an object store failed.
    retry_after_seconds: float
    #: Seconds one object-store call may take in all before it counts as failed.
    timeout_seconds: float
    #: Folder holding session workspaces; ``None``: the system temporary folder.
    root: str | None
    #: Keep a local workspace when the pipeline closes.
    keep: bool
    #: When the full text cannot be saved: keep the result whole, or cut it and report.
    on_error: Literal["keep", "truncate"]
    #: How long a session may still be used after a request: what an object store's hold
    #: tells ``gc``, whatever ``gc``'s own policy says.
    session_idle_seconds: float = setting("proxy.session_idle_seconds")
