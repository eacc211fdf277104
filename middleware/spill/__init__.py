"""Spill stores: where the full text of results cut from the context is kept (a local
workspace, or an object store that replicas share), read back and removed."""

from __future__ import annotations

from middleware.spill.layout import SpillError, SpillTimeout, spill_file_name
from middleware.spill.settings import SpillSettings
from middleware.spill.stores import open_root, open_store
from middleware.spill.workspace import SpillWorkspace

__all__ = [
    "SpillError",
    "SpillSettings",
    "SpillTimeout",
    "SpillWorkspace",
    "open_root",
    "open_store",
    "spill_file_name",
]
