"""Ship the top-level policies/ and schemas/ inside the wheel as middleware/_data/.

Only for the standard wheel: an editable install reads them from the source tree
(middleware/resources.py), and force-including them there would copy a stale
site-packages/middleware/_data/ beside the real package (pypa/hatch#1627).
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class DataFilesHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "standard":
            build_data["force_include"]["policies"] = "middleware/_data/policies"
            build_data["force_include"]["schemas"] = "middleware/_data/schemas"
