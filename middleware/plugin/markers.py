"""The marker plugins use on their hook implementations: ``@hookimpl``."""

from __future__ import annotations

import pluggy

from middleware.plugin.hookspecs import PROJECT_NAME

#: Marks a function or method as the implementation of the hook of the same name.
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
