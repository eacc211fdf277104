"""Spill stores: where the full text of results cut from the context is kept."""

from __future__ import annotations

from middleware.spill.settings import SpillSettings
from middleware.spill.workspace import SpillError, SpillWorkspace, spill_file_name

__all__ = ["SpillError", "SpillSettings", "SpillWorkspace", "spill_file_name"]
