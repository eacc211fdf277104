"""The ``spill`` section: where the full text of cut results is kept, and what happens
when it cannot be."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from middleware.policy.settings import section


@section("spill")
@dataclass(frozen=True)
class SpillSettings:
    #: Folder holding session workspaces; ``None``: the system temporary folder.
    root: str | None
    #: Keep the workspace when the pipeline closes.
    keep: bool
    #: When the full text cannot be saved: keep the result whole, or cut it and report.
    on_error: Literal["keep", "truncate"]
